// Node preload (--require) for the conformance harness: its mock servers listen on all
// interfaces; tests/servers/loopback.cjs pins them to 127.0.0.1. A listen() with a host goes
// through an asynchronous dns.lookup, and the harness reads server.address() right after
// listen(): answer the lookup of the literal 127.0.0.1 at once, so the address is there.
require("../servers/loopback.cjs");
const dns = require("dns");
const lookup = dns.lookup;
dns.lookup = function (host, options, callback) {
  if (host === "127.0.0.1") {
    const cb = typeof options === "function" ? options : callback;
    const all = typeof options === "object" && options !== null && options.all;
    return all ? cb(null, [{ address: host, family: 4 }]) : cb(null, host, 4);
  }
  return lookup.apply(this, arguments);
};
