/**
 * The SQLite driver for this Node: better-sqlite3 12 on Node 20 (the last line that runs there),
 * better-sqlite3 13 (installed under the alias `better-sqlite3-node22`) on Node 22 and later.
 * Version 12 aborts the process on Node 22+ when one of its statements is garbage-collected at a
 * moment no JavaScript context is entered ("Assertion failed: (env) != nullptr", upstream
 * WiseLibs/better-sqlite3 #1515), which under load is a matter of time; 13 fixed it and ships
 * Node-API binaries for Node 22+, so nothing is compiled for it. Both have the same API.
 */
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

export const SQLITE_DRIVER = Number(process.versions.node.split('.')[0]) >= 22 ? 'better-sqlite3-node22' : 'better-sqlite3';

const require = createRequire(import.meta.url);
const Database = require(SQLITE_DRIVER) as typeof BetterSqlite3;
export default Database;
