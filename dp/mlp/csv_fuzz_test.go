package mlp

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadCSV: any file either is an error or a table whose every sample is finite
// features of its width and a label below its class count; never a panic.
func FuzzLoadCSV(f *testing.F) {
	f.Add([]byte("f1,f2,label\n1,2,0\n3.5,-4,2\n"))
	f.Add([]byte("1,NaN,0\n"))
	f.Add([]byte("1,2,9223372036854775807\n"))
	f.Add([]byte("\"1\",2,1\n\"a\"\"b\",3,0\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "d.csv")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		tab, err := LoadCSV(path)
		if err != nil {
			return
		}
		if tab.Dim() < 1 || tab.Classes() < 2 || tab.Classes() > MaxClasses || tab.Rows() < 1 {
			t.Fatalf("%q: table of %d features, %d classes, %d rows", data, tab.Dim(), tab.Classes(), tab.Rows())
		}
		x := make([]float32, tab.Dim())
		for i := range tab.Rows() {
			if y := tab.Sample(i, x); y < 0 || y >= tab.Classes() {
				t.Fatalf("%q: row %d has label %d of %d classes", data, i, y, tab.Classes())
			}
			for _, v := range x {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%q: row %d has feature %v", data, i, v)
				}
			}
		}
	})
}
