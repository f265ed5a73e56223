// k6 script for the documents pair: containment searches at a constant
// arrival rate over users created in setup(), plus a neighbour-column patch
// and a profile rewrite scenario.
//   k6 run -e BASE_URL=http://localhost:8086 loadtests/k6/documents.js   (no-mongodb)
//   k6 run -e BASE_URL=http://localhost:8085 loadtests/k6/documents.js   (mongodb / FerretDB)
// USERS (default 200), RATE (searches/s, default 20), DURATION (default 30s).
import http from 'k6/http';
import { check } from 'k6';
import { Trend } from 'k6/metrics';

const BASE_URL = __ENV.BASE_URL || 'http://localhost:8086';
const USERS = parseInt(__ENV.USERS || '200', 10);
const RATE = parseInt(__ENV.RATE || '20', 10);
const DURATION = __ENV.DURATION || '30s';
const params = { headers: { 'Content-Type': 'application/json' } };
const rewriteTime = new Trend('profile_rewrite_ms', true);
const cities = ['Lyon', 'Paris', 'Berlin', 'Madrid'];
const tags = ['go', 'postgres', 'kafka', 'rust'];
const queries = [
  { address: { city: 'Lyon' } },
  { tags: ['go'] },
  { prefs: { lang: 'de', newsletter: true } },
];

export const options = {
  scenarios: {
    search: { executor: 'constant-arrival-rate', exec: 'search', rate: RATE, timeUnit: '1s', duration: DURATION, preAllocatedVUs: 10, maxVUs: 200 },
    patch: { executor: 'constant-arrival-rate', exec: 'patch', rate: 5, timeUnit: '1s', duration: DURATION, preAllocatedVUs: 5, maxVUs: 50 },
    rewrite: { executor: 'constant-arrival-rate', exec: 'rewrite', rate: 2, timeUnit: '1s', duration: DURATION, preAllocatedVUs: 5, maxVUs: 50 },
  },
  thresholds: {
    'http_req_failed': ['rate<0.01'],
    'http_req_duration{scenario:search}': ['p(95)<100'],
    'profile_rewrite_ms': ['p(99)<2000'],
  },
};

function profile(i) {
  return { address: { city: cities[i % cities.length], country: 'FR' }, tags: [tags[i % tags.length]], prefs: { lang: i % 2 ? 'de' : 'en', newsletter: i % 3 === 0 }, score: i % 100 };
}

export function setup() {
  http.post(`${BASE_URL}/stats/reset`, null);
  const run = Date.now();
  const ids = [];
  for (let i = 0; i < USERS; i++) {
    const body = JSON.stringify({ email: `k6-${run}-${i}@load.test`, name: `user ${i}`, plan: 'free', profile: profile(i) });
    const res = http.post(`${BASE_URL}/users`, body, params);
    check(res, { 'user created (201)': (r) => r.status === 201 });
    if (res.status === 201) ids.push(res.json('id'));
  }
  return { ids: ids, big: JSON.stringify({ kind: 'large', text: 'lorem ipsum '.repeat(512 * 1024 / 12) }) };
}

export function search() {
  const q = queries[__ITER % queries.length];
  const res = http.post(`${BASE_URL}/users/search`, JSON.stringify({ profile: q, limit: 50 }), params);
  check(res, { 'search ok (200)': (r) => r.status === 200 });
}

export function patch(data) {
  const id = data.ids[__ITER % data.ids.length];
  const res = http.patch(`${BASE_URL}/users/${id}`, JSON.stringify({ name: `n${__ITER}` }), params);
  check(res, { 'patch ok (200)': (r) => r.status === 200 });
}

export function rewrite(data) {
  const id = data.ids[__ITER % data.ids.length];
  const res = http.put(`${BASE_URL}/users/${id}/profile`, data.big, params);
  check(res, { 'rewrite ok (200)': (r) => r.status === 200 });
  rewriteTime.add(res.timings.duration);
}

export function teardown(data) {
  for (const id of data.ids) {
    http.del(`${BASE_URL}/users/${id}`);
  }
  console.log(`stats: ${http.get(`${BASE_URL}/stats`).body}`);
}
