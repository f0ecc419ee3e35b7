package perf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// jsonWriter writes the -J file the way nccl-tests' util.cu does: a streaming writer
// with a stack of states, booleans as the strings "true"/"false", doubles as %f, and
// strings cut at the first character it does not escape. It is written by hand (not
// encoding/json) because the byte layout is the compatibility contract.
type jsonWriter struct {
	f      io.Closer // nil when writing to a caller's io.Writer
	w      *bufio.Writer
	path   string
	states []jstate
}

type jstate uint8

const (
	jKey jstate = iota + 1
	jObjectEmpty
	jObjectSome
	jListEmpty
	jListSome
)

// openJSON creates path exclusively; if it exists, it tries path.0, path.1, ... as
// nccl-tests does, so a benchmark never overwrites an earlier result.
func openJSON(path string) (*jsonWriter, error) {
	try := path
	for i := 0; ; i++ {
		f, err := os.OpenFile(try, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return &jsonWriter{f: f, w: bufio.NewWriter(f), path: try}, nil
		}
		if !errors.Is(err, fs.ErrExist) || i >= 1000 {
			return nil, fmt.Errorf("perf: -J %s: %w", path, err)
		}
		try = fmt.Sprintf("%s.%d", path, i)
	}
}

// newJSONWriter writes to w (tests, or a caller that owns the file).
func newJSONWriter(w io.Writer) *jsonWriter { return &jsonWriter{w: bufio.NewWriter(w)} }

func (j *jsonWriter) top() jstate {
	if len(j.states) == 0 {
		return 0
	}
	return j.states[len(j.states)-1]
}

func (j *jsonWriter) push(s jstate) { j.states = append(j.states, s) }
func (j *jsonWriter) pop() jstate {
	s := j.top()
	if len(j.states) > 0 {
		j.states = j.states[:len(j.states)-1]
	}
	return s
}

func (j *jsonWriter) key(name string) {
	switch j.top() {
	case jObjectEmpty:
		j.states[len(j.states)-1] = jObjectSome
	case jObjectSome:
		j.w.WriteByte(',')
	}
	fmt.Fprintf(j.w, "\"%s\":", sanitizeJSON(name))
	j.push(jKey)
}

// value emits the separator a value needs at the current position.
func (j *jsonWriter) value() {
	switch j.top() {
	case jListEmpty:
		j.states[len(j.states)-1] = jListSome
	case jListSome:
		j.w.WriteByte(',')
	case jKey:
		j.pop()
	}
}

func (j *jsonWriter) startObject()  { j.value(); j.w.WriteByte('{'); j.push(jObjectEmpty) }
func (j *jsonWriter) finishObject() { j.pop(); j.w.WriteByte('}') }
func (j *jsonWriter) startList()    { j.value(); j.w.WriteByte('['); j.push(jListEmpty) }
func (j *jsonWriter) finishList()   { j.pop(); j.w.WriteByte(']') }
func (j *jsonWriter) null()         { j.value(); j.w.WriteString("null") }
func (j *jsonWriter) str(s string)  { j.value(); fmt.Fprintf(j.w, "\"%s\"", sanitizeJSON(s)) }
func (j *jsonWriter) int(v int)     { j.value(); j.w.WriteString(strconv.Itoa(v)) }
func (j *jsonWriter) int64(v int64) { j.value(); j.w.WriteString(strconv.FormatInt(v, 10)) }

func (j *jsonWriter) boolStr(b bool) {
	if b {
		j.str("true")
	} else {
		j.str("false")
	}
}

func (j *jsonWriter) double(v float64) {
	j.value()
	switch {
	case math.IsNaN(v):
		j.w.WriteString(`"nan"`)
	case math.IsInf(v, 1):
		j.w.WriteString("inf")
	case math.IsInf(v, -1):
		j.w.WriteString("-inf")
	default:
		j.w.WriteString(strconv.FormatFloat(v, 'f', 6, 64))
	}
}

// sanitizeJSON escapes ", \, /, tab and newline, and stops at the first other control
// or non-ASCII byte (nccl-tests gives up on those rather than guess an encoding).
func sanitizeJSON(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 2046; i++ {
		c := s[i]
		switch c {
		case '"', '\\', '/':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		default:
			if c >= 0x7f || c <= 0x1f {
				return b.String()
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}

// secretEnv matches environment variables whose values must not land in a result file.
var secretEnv = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|_KEY$|^KEY$)`)

// begin writes the opening fields: version, start time, args, env, nccl_version.
func (j *jsonWriter) begin(args, env []string, now time.Time) {
	j.startObject()
	j.key("version")
	j.int(3) // JSON_FILE_VERSION of nccl-tests 2.19
	j.key("start_time")
	j.str(now.Format("2006-01-02 15:04:05"))
	j.key("args")
	j.startList()
	for _, a := range args {
		j.str(a)
	}
	j.finishList()
	j.key("env")
	j.startList()
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); ok && secretEnv.MatchString(k) {
			e = k + "=<redacted>"
		}
		j.str(e)
	}
	j.finishList()
	j.key("nccl_version")
	j.int(0) // goccl does not use NCCL for host collectives
}

// end writes end_time, closes every open object and list, and closes the file.
func (j *jsonWriter) end(now time.Time) error {
	if len(j.states) == 1 && (j.top() == jObjectEmpty || j.top() == jObjectSome) {
		j.key("end_time")
		j.str(now.Format("2006-01-02 15:04:05"))
	}
	for len(j.states) > 0 {
		switch j.top() {
		case jKey:
			j.null()
		case jObjectEmpty, jObjectSome:
			j.finishObject()
		default:
			j.finishList()
		}
	}
	err := j.w.Flush()
	if j.f != nil {
		if cerr := j.f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("perf: write %s: %w", j.path, err)
	}
	return nil
}
