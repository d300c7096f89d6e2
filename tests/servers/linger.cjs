// Preloaded into node (--require): the server keeps running after its stdin ends and
// ignores SIGTERM, as a server busy with its own work may. Only SIGKILL ends it.
setInterval(() => {}, 1 << 30);
process.on("SIGTERM", () => {});
