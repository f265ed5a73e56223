// Not an area of the suite: this package's own test of its search oracle,
// documents.Contains, against Postgres' jsonb @>.

package conformance

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestContainsMatchesPostgres checks the reference implementation against
// the real jsonb @> on every pair of generated profiles and suite queries:
// the oracle the suite judges both services by is Postgres itself.
func TestContainsMatchesPostgres(t *testing.T) {
	t.Parallel()
	ctx := kittest.Context(t, 60*time.Second)
	conn := kittest.Conn(t, kittest.PostgresURL(t))
	r := rand.New(rand.NewPCG(3, 4))
	var docs, queries []string
	for range 150 {
		b, _ := json.Marshal(genProfile(r, "x", true))
		docs = append(docs, string(b))
	}
	for _, q := range searchQueries {
		v, err := documents.Parse([]byte(q))
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, string(documents.Encode(append(documents.Object{{Key: "ds", Value: "x"}}, v.(documents.Object)...))))
	}
	queries = append(queries, `{"a":[1,[2]]}`, `[]`, `1`)
	docs = append(docs, `{"a":[1,[2,3]]}`, `[1,2]`, `{"n":1.0}`)
	queries = append(queries, `{"n":1}`, `{"n":1.00}`, `{"n":"1"}`)
	// Arrays long enough on both sides for Contains' set of scalars.
	docs = append(docs, `{"h":[1,2.0,"3",null,true,false,{"k":1},[5],1e2,-0,"x",0.5]}`, `{"h":[1,2,3,4,5,6]}`)
	queries = append(queries, `{"h":[2,1.0,"3",null,true,100,0,{"k":1},"x"]}`, `{"h":[2,1,3,null,true]}`,
		`{"h":[false,true,null,"x",-0.0,10e1,5e-1]}`, `{"h":[[5],1,2,"3",true,"y"]}`, `{"h":[6,5,4,3,2,1.0]}`, `{"h":[6,5,4,3,2,"1"]}`)
	rows, err := conn.Query(ctx, `
		SELECT i, j, d::jsonb @> q::jsonb
		FROM unnest($1::text[]) WITH ORDINALITY AS a(d, i),
		     unnest($2::text[]) WITH ORDINALITY AS b(q, j)`, docs, queries)
	if err != nil {
		t.Fatal(err)
	}
	n, matches := 0, 0
	for rows.Next() {
		var i, j int
		var want bool
		if err := rows.Scan(&i, &j, &want); err != nil {
			t.Fatal(err)
		}
		d, err1 := documents.Parse([]byte(docs[i-1]))
		q, err2 := documents.Parse([]byte(queries[j-1]))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		// Top-level arrays and scalars are outside the contract (a profile
		// is an object); jsonb's raw-scalar special case is not modelled.
		if _, ok := d.(documents.Object); !ok {
			continue
		}
		n++
		if want {
			matches++
		}
		if got := documents.Contains(d, q); got != want {
			t.Errorf("%s @> %s: Contains %v, Postgres %v", docs[i-1], queries[j-1], got, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 5000 || matches < 500 {
		t.Errorf("only %d pairs, %d matches", n, matches)
	}
}
