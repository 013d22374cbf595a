// node-redis's client-side cache (RESP3, CLIENT TRACKING) against a server on argv[2]'s
// port, as an application uses it: a cached client reads 200 keys twice (the second time
// from its cache: the server counts no GET), another client rewrites a random 20 of them per
// round, and every rewritten key reads its new value on the cached client within a bound
// (its invalidation arrived), while the keys not rewritten stay cached.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.resolve(process.argv[3], 'node_modules') + '/');
const { createClient } = require('redis');

const port = Number(process.argv[2]);
const KEYS = 200;
const ROUNDS = 30;
const WAIT_MS = 20_000;

// A seeded generator (xorshift), so each run rewrites the same keys.
let state = 24;
const random = (n) => {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state % n;
};

const fail = (why) => { console.error(why); process.exit(1); };

const cached = createClient({ socket: { port }, RESP: 3, clientSideCache: { ttl: 0, maxEntries: 0 } });
const plain = createClient({ socket: { port } });
await cached.connect();
await plain.connect();
const gets = async () => {
  const m = (await plain.info('commandstats')).match(/cmdstat_get:calls=(\d+)/);
  return m ? Number(m[1]) : 0;
};

const names = Array.from({ length: KEYS }, (_, i) => `cc:${i}`);
const expected = new Map();
for (const n of names) { await plain.set(n, 'v0'); expected.set(n, 'v0'); }
for (const n of names) if ((await cached.get(n)) !== 'v0') fail(`${n} first read`);
let before = await gets();
for (const n of names) if ((await cached.get(n)) !== 'v0') fail(`${n} cached read`);
if ((await gets()) !== before) fail('cached reads reached the server');

for (let round = 1; round <= ROUNDS; round++) {
  const written = new Set();
  while (written.size < 20) written.add(names[random(KEYS)]);
  for (const n of written) { await plain.set(n, `v${round}`); expected.set(n, `v${round}`); }
  const deadline = Date.now() + WAIT_MS;
  for (const n of written) {
    // Bounded: the invalidation is a push on the cached connection.
    while ((await cached.get(n)) !== expected.get(n)) {
      if (Date.now() > deadline) fail(`${n} stale past ${WAIT_MS} ms`);
      await new Promise((r) => setTimeout(r, 1));
    }
  }
  const kept = names.filter((n) => !written.has(n)).slice(0, 50);
  before = await gets();
  for (const n of kept) if ((await cached.get(n)) !== expected.get(n)) fail(`${n} wrong`);
  const served = (await gets()) - before;
  if (served > 0) fail(`${served} of ${kept.length} unchanged keys refetched`);
}
for (const n of names) if ((await cached.get(n)) !== expected.get(n)) fail(`${n} at the end`);
console.log(`rounds ${ROUNDS}, keys ${KEYS}: every write seen, unchanged keys cached`);
await cached.quit();
await plain.quit();
