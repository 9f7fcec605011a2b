// A concurrent writer for snapshot tests: small transactions of inserts, updates (some of the
// key) and deletes on a `(id, version, payload)` table until stopped.
import pg from 'pg';

export interface ChurnWriter {
  readonly ops: number;
  /** Stops after the statement in progress; rethrows what the writer hit, if anything. */
  stop(): Promise<void>;
}

/** `firstNewId`: ids for inserts and key changes start here; `maxId()`: updates/deletes target 1..maxId(). */
export function startChurnWriter(config: pg.ClientConfig, table: string, firstNewId: number, maxId: () => number): ChurnWriter {
  let stop = false;
  let ops = 0;
  let failure: unknown = null;
  let nextId = firstNewId;
  const done = (async () => {
    const c = new pg.Client(config);
    await c.connect();
    try {
      while (!stop) {
        const r = Math.random();
        const target = 1 + Math.floor(Math.random() * maxId());
        if (r < 0.3) await c.query(`INSERT INTO ${table} VALUES ($1, 1, md5(random()::text))`, [nextId++]);
        else if (r < 0.75) await c.query(`UPDATE ${table} SET version = version + 1, payload = md5(random()::text) WHERE id = $1`, [target]);
        else if (r < 0.85) await c.query(`UPDATE ${table} SET id = $2, version = version + 1 WHERE id = $1`, [target, nextId++]);
        else await c.query(`DELETE FROM ${table} WHERE id = $1`, [target]);
        ops++;
      }
    } catch (error) {
      if (!stop) failure = error;
    } finally {
      await c.end().catch(() => undefined);
    }
  })();
  return {
    get ops() {
      return ops;
    },
    async stop() {
      stop = true;
      await done;
      if (failure) throw failure;
    },
  };
}
