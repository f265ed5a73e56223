// k6 script for the log pair: POST /events at a constant arrival rate.
//   k6 run -e BASE_URL=http://localhost:8084 loadtests/k6/log.js   (no-kafka)
//   k6 run -e BASE_URL=http://localhost:8083 loadtests/k6/log.js   (kafka)
// RATE (default 200 events/s) and DURATION (default 30s) are env vars too.
// Delivery latency is the consumer's, read from GET /stats at the end.
import http from 'k6/http';
import { check } from 'k6';
import { Counter } from 'k6/metrics';

const BASE_URL = __ENV.BASE_URL || 'http://localhost:8084';
const RATE = parseInt(__ENV.RATE || '200', 10);
const DURATION = __ENV.DURATION || '30s';
const params = { headers: { 'Content-Type': 'application/json' } };
const rejected = new Counter('events_rejected');

export const options = {
  scenarios: {
    events: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: 20,
      maxVUs: 500,
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    http_req_duration: ['p(99)<50'],
  },
};

export function setup() {
  http.post(`${BASE_URL}/stats/reset`, null);
}

export default function () {
  const body = JSON.stringify({ type: 'load.tick', key: `k${__ITER % 64}`, payload: { n: __ITER } });
  const res = http.post(`${BASE_URL}/events`, body, params);
  if (!check(res, { 'event written (201)': (r) => r.status === 201 })) {
    rejected.add(1);
  }
}

export function teardown() {
  console.log(`stats: ${http.get(`${BASE_URL}/stats`).body}`);
  console.log(`consumer: ${http.get(`${BASE_URL}/consumer`).body}`);
}
