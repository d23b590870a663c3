package bench

import (
	"context"
	"testing"
)

func BenchmarkEgressDownloadIntercepted(b *testing.B) {
	eb, err := startEgressBench(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer eb.close()
	for i := 0; i < b.N; i++ {
		if _, err := eb.get(context.Background(), eb.intercept, "cred.bench", 100_000_000); err != nil {
			b.Fatal(err)
		}
	}
}
