const Database = require('better-sqlite3');
const db = new Database(process.argv[2] || ':memory:');
db.pragma('locking_mode = EXCLUSIVE'); db.pragma('journal_mode = WAL'); db.pragma('synchronous = NORMAL'); db.pragma('temp_store = MEMORY'); db.pragma('cache_size = -16384');
db.exec('CREATE TABLE d (rid INTEGER PRIMARY KEY, id TEXT UNIQUE, v INT, doc BLOB)');
for (let i = 0; i < 6; i++) db.exec(`CREATE TABLE i${i} (k0 BLOB, id TEXT, rid INT, PRIMARY KEY (k0, id)) WITHOUT ROWID`);
const big = JSON.stringify({ title: 'x'.repeat(100), description: 'word '.repeat(60), labels: ['a', 'b'], n: 1 });
const ins = db.prepare('INSERT INTO d (id, v, doc) VALUES (?, ?, jsonb(?))');
db.transaction(() => { for (let i = 0; i < 5000; i++) ins.run('t' + i, 1, big); })();
const upd = db.prepare('UPDATE d SET v = ?, doc = jsonb(?) WHERE rid = ?');
const idel = [...Array(6)].map((_, i) => db.prepare(`DELETE FROM i${i} WHERE k0 = ? AND id = ?`));
const iins = [...Array(6)].map((_, i) => db.prepare(`INSERT INTO i${i} (k0, id, rid) VALUES (?, ?, ?)`));
let v = 2;
function one(k) { const rid = 1 + ((k * 97) % 5000); upd.run(v++, big, rid); for (let i = 0; i < 6; i++) { idel[i].run(Buffer.from('k' + (v - 1)), 't' + rid); iins[i].run(Buffer.from('k' + v), 't' + rid, rid); } }
const atomic = db.transaction((f) => f());
function run(mode) {
  const t = process.cpuUsage(); const N = 20000;
  for (let b = 0; b < N / 50; b++) {
    atomic.immediate(() => { for (let j = 0; j < 50; j++) { if (mode === 'sp') atomic(() => one(b * 50 + j)); else one(b * 50 + j); } });
  }
  const c = process.cpuUsage(t); return ((c.user + c.system) / N).toFixed(1);
}
for (let r = 0; r < 3; r++) console.log('savepoints', run('sp'), 'us/op; none', run('none'), 'us/op');
