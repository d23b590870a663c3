package snapshot

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type opRecord struct {
	op, outcome string
	bytes       int64
}

type fakeRecorder struct{ ops []opRecord }

func (f *fakeRecorder) Snapshot(op, outcome string, n int64, _ time.Duration) {
	f.ops = append(f.ops, opRecord{op, outcome, n})
}

// TestOperationsAreRecorded: a save is told with its archive bytes, a
// restore with the bytes it read and its error code.
func TestOperationsAreRecorded(t *testing.T) {
	home := t.TempDir()
	rec := &fakeRecorder{}
	svc := NewService(Config{Home: home, Metrics: rec})

	w := httptest.NewRecorder()
	svc.HandleSave(w, httptest.NewRequest(http.MethodPost, "/v1/snapshot/save", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("save: %d %s", w.Code, w.Body)
	}
	archive := int64(w.Body.Len())

	junk := strings.Repeat("not an archive ", 100)
	w = httptest.NewRecorder()
	svc.HandleRestore(w, httptest.NewRequest(http.MethodPost, "/v1/snapshot/restore", bytes.NewReader([]byte(junk))))
	if w.Code != http.StatusBadRequest {
		t.Fatalf("restore of junk: %d %s", w.Code, w.Body)
	}
	if len(rec.ops) != 2 || rec.ops[0] != (opRecord{"save", "ok", archive}) ||
		rec.ops[1].op != "restore" || rec.ops[1].outcome != "archive_malformed" || rec.ops[1].bytes <= 0 || rec.ops[1].bytes > int64(len(junk)) {
		t.Fatalf("recorded %+v, want save ok %d bytes, then restore archive_malformed with the bytes read", rec.ops, archive)
	}
}
