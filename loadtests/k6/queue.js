// k6 script for the queue pair: POST /tasks at a constant arrival rate.
//   k6 run -e BASE_URL=http://localhost:8082 loadtests/k6/queue.js   (no-rabbitmq)
//   k6 run -e BASE_URL=http://localhost:8081 loadtests/k6/queue.js   (rabbitmq)
// RATE (default 1000 tasks/s) and DURATION (default 30s) are env vars too.
// Server-side latencies (delivery, send→processed) are read from GET /stats
// at the end; POST /stats/reset at the start makes them cover this run only.
import http from 'k6/http';
import { check } from 'k6';
import { Counter } from 'k6/metrics';

const BASE_URL = __ENV.BASE_URL || 'http://localhost:8082';
const RATE = parseInt(__ENV.RATE || '1000', 10);
const DURATION = __ENV.DURATION || '30s';
const params = { headers: { 'Content-Type': 'application/json' } };
const rejected = new Counter('tasks_rejected');

export const options = {
  scenarios: {
    tasks: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: 50,
      maxVUs: 1000,
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    http_req_duration: ['p(99)<100'],
    dropped_iterations: ['count<100'],
  },
};

export function setup() {
  http.post(`${BASE_URL}/stats/reset`, null);
}

export default function () {
  const body = JSON.stringify({ kind: 'load', payload: { n: __ITER }, fail_times: 0 });
  const res = http.post(`${BASE_URL}/tasks`, body, params);
  if (!check(res, { 'task accepted (202)': (r) => r.status === 202 })) {
    rejected.add(1);
  }
}

export function teardown() {
  const stats = http.get(`${BASE_URL}/stats`);
  const queue = http.get(`${BASE_URL}/queue`);
  console.log(`stats: ${stats.body}`);
  console.log(`queue: ${queue.body}`);
}
