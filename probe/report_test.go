package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadReport(t *testing.T) {
	tests := []struct {
		name, data, err string
	}{
		{"written by probe -o", `{"host":{"gpus":[]},"packages":{},"verdicts":{},"findings":[]}`, ""},
		{"packages only", `{"packages":{"torch":{"version":"2.11.0","location":"/sp"}}}`, ""},
		{"another JSON object", `{"hello": 1}`, `not a probe report: no "packages", "verdicts" or "findings" key`},
		{"empty object", `{}`, "not a probe report"},
		{"null", `null`, "not a probe report"},
		{"array", `[]`, "not a probe report"},
		{"not JSON", `{bad`, "not a probe report"},
		{"wrong type", `{"packages": []}`, "not a probe report"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			if err := os.WriteFile(path, []byte(tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := ReadReport(path)
			if tt.err == "" {
				if err != nil || r == nil || r.Packages == nil {
					t.Fatalf("ReadReport: %v, %+v", err, r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), path+": ") {
				t.Fatalf("error %v, want %s: ...%q...", err, path, tt.err)
			}
		})
	}
}
