package stackcheck

import (
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"
)

// TestKafkaClusterIDsAreNeverReadAsOptions draws many cluster ids the way
// `stack.sh up` formats Kafka's storage with, and checks each is 16 bytes of
// base64url that does not start with '-': kafka-storage's argument parser
// takes such an id for an option and the first start of the stack fails
// ("argument --cluster-id/-t: expected one argument"). One id in 64 starts
// with '-', so 1,000 draws from an unguarded generator hit one almost surely.
func TestKafkaClusterIDsAreNeverReadAsOptions(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("bash", stackScript, "kafka-cluster-id", "1000").Output()
	if err != nil {
		t.Fatalf("stack.sh kafka-cluster-id: %v", err)
	}
	ids := strings.Fields(string(out))
	if len(ids) != 1000 {
		t.Fatalf("got %d ids, want 1000", len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if strings.HasPrefix(id, "-") {
			t.Errorf("cluster id %q starts with '-'", id)
		}
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) != 16 {
			t.Errorf("cluster id %q is not 16 bytes of unpadded base64url (err %v)", id, err)
		}
		if seen[id] {
			t.Errorf("cluster id %q drawn twice", id)
		}
		seen[id] = true
	}
}
