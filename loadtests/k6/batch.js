// k6 script for the throughput scenario: closed-loop senders POSTing
// batches (the Go driver's `go run ./loadtests throughput`, one batch size
// per k6 run).
//   k6 run -e PAIR=queue -e BASE_URL=http://localhost:8082 -e BATCH=100 loadtests/k6/batch.js   (no-rabbitmq)
//   k6 run -e PAIR=queue -e BASE_URL=http://localhost:8081 -e BATCH=100 loadtests/k6/batch.js   (rabbitmq)
//   k6 run -e PAIR=log   -e BASE_URL=http://localhost:8084 -e BATCH=100 loadtests/k6/batch.js   (no-kafka)
//   k6 run -e PAIR=log   -e BASE_URL=http://localhost:8083 -e BATCH=100 loadtests/k6/batch.js   (kafka)
// PAIR is queue (POST /tasks/batch) or log (POST /events/batch); BATCH
// (default 100, 1 to 1000) items per request; SENDERS (default 4) VUs, each
// sending its next batch as soon as the last one is answered (k6's
// constant-vus executor: a closed loop); DURATION (default 30s).
// items_accepted counts the items of accepted batches (its rate in the
// summary is accepted items/s). Teardown waits up to DRAIN (default 60s)
// for the backlog to drain, then logs the end-to-end rate: items processed
// (or delivered) since setup's POST /stats/reset over the seconds since it,
// and the server's end-to-end latencies from GET /stats. CPU per item is
// the Go driver's alone (it reads /proc on the servers' machine).
import http from 'k6/http';
import { check, sleep } from 'k6';
import { Counter } from 'k6/metrics';

const PAIR = __ENV.PAIR || 'queue';
const BASE_URL = __ENV.BASE_URL || (PAIR === 'log' ? 'http://localhost:8084' : 'http://localhost:8082');
const BATCH = parseInt(__ENV.BATCH || '100', 10);
const SENDERS = parseInt(__ENV.SENDERS || '4', 10);
const DURATION = __ENV.DURATION || '30s';
const DRAIN_S = parseInt(__ENV.DRAIN || '60', 10);
const params = { headers: { 'Content-Type': 'application/json' } };
const accepted = new Counter('items_accepted');
const rejected = new Counter('batches_rejected');

// The pairs: endpoint, body field, expected status, /stats counters in and
// out, the progress endpoint and the item, the same as the Go driver's.
const PAIRS = {
  queue: {
    path: '/tasks/batch', field: 'tasks', status: 202, in: ['enqueued'], out: ['processed', 'dead'], progress: '/queue',
    item: (n) => ({ kind: 'load', payload: { n: n }, fail_times: 0 }),
  },
  log: {
    path: '/events/batch', field: 'events', status: 201, in: ['written'], out: ['delivered'], progress: '/consumer',
    item: (n) => ({ type: 'load.tick', key: `k${n % 64}`, payload: { n: n } }),
  },
};
const P = PAIRS[PAIR];
if (!P) {
  throw new Error(`PAIR=${PAIR}: want queue or log`);
}
if (!(BATCH >= 1 && BATCH <= 1000)) {
  throw new Error(`BATCH=${__ENV.BATCH}: want 1 to 1000`);
}

// One body, built once: items numbered from 0, as the Go driver sends.
const items = [];
for (let i = 0; i < BATCH; i++) {
  items.push(P.item(i));
}
const body = JSON.stringify({ [P.field]: items });

export const options = {
  scenarios: {
    batches: {
      executor: 'constant-vus',
      vus: SENDERS,
      duration: DURATION,
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    items_accepted: ['count>0'],
  },
};

export function setup() {
  http.post(`${BASE_URL}/stats/reset`, null);
}

export default function () {
  const res = http.post(`${BASE_URL}${P.path}`, body, params);
  if (check(res, { [`batch accepted (${P.status})`]: (r) => r.status === P.status })) {
    accepted.add(BATCH);
  } else {
    rejected.add(1);
  }
}

function sum(counters, names) {
  let n = 0;
  for (const name of names) {
    n += (counters && counters[name]) || 0;
  }
  return n;
}

export function teardown() {
  let stats = {};
  for (let waited = 0; ; waited++) {
    stats = http.get(`${BASE_URL}/stats`).json() || {};
    const backlog = sum(stats.counters, P.in) - sum(stats.counters, P.out);
    if (backlog <= 0 || waited >= DRAIN_S * 10) {
      if (backlog > 0) {
        console.log(`backlog of ${backlog} items left after ${DRAIN_S}s`);
      }
      break;
    }
    sleep(0.1);
  }
  const out = sum(stats.counters, P.out);
  const secs = stats.since_reset_s || 0;
  console.log(`end to end: ${out} items in ${secs}s since the reset: ${secs > 0 ? Math.round(out / secs) : 0} items/s`);
  console.log(`stats: ${JSON.stringify(stats)}`);
  console.log(`${P.progress.slice(1)}: ${http.get(`${BASE_URL}${P.progress}`).body}`);
}
