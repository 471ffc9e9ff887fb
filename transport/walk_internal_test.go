package transport

import (
	"context"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"go.opentelemetry.io/otel/trace"

	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/translate"
	"github.com/omniroute/gateway/transport/upstream"
)

// keptOnPurpose are the parts of a call that release keeps for the next
// request, each cleared by its own package's Reset (the scans' results,
// the planner's decisions) or holding no result at all (the event
// reader, the fitter, the waiter's timer). The test leaves them alone;
// every other field must come back from release as a fresh call's.
var keptOnPurpose = map[string]bool{
	"call.scan":           true, // jsonscan.Request.Reset
	"call.att.altScan":    true, // jsonscan.Request.Reset
	"call.plan.Plan":      true, // planner.Plan.Reset
	"call.plan.waiter":    true,
	"call.stream.rd":      true,
	"call.att.fit.fitter": true,
}

// TestReleaseClearsEveryField fills every field of a call (every stage's
// state, down to the fields of other packages' types) with a non-zero
// value, releases it, and requires it to equal a call released empty: a
// field a stage forgets to clear would carry one request's state into
// the next (a tenant, a target, a usage report, a lease). Kept buffers
// may keep their capacity, never their contents.
func TestReleaseClearsEveryField(t *testing.T) {
	c := &call{}
	fillValue(t, reflect.ValueOf(c).Elem(), "call")
	c.release()
	z := &call{}
	z.release()
	if n := compareValue(t, reflect.ValueOf(c).Elem(), reflect.ValueOf(z).Elem(), "call"); n == 0 {
		t.Fatal("nothing was compared")
	}
}

// settable makes an unexported field writable.
func settable(v reflect.Value) reflect.Value {
	if v.CanSet() {
		return v
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

var (
	mutexType   = reflect.TypeOf(sync.Mutex{})
	rwMutexType = reflect.TypeOf(sync.RWMutex{})
	contextType = reflect.TypeOf((*context.Context)(nil)).Elem()
	spanType    = reflect.TypeOf((*trace.Span)(nil)).Elem()
	exchangeT   = reflect.TypeOf((*upstream.Exchange)(nil))
	translatorT = reflect.TypeOf((*translate.Translator)(nil))
)

// fillValue sets v, at path, to a non-zero value.
func fillValue(t *testing.T, v reflect.Value, path string) {
	if keptOnPurpose[path] {
		return
	}
	v = settable(v)
	switch v.Type() {
	case mutexType, rwMutexType:
		return // release locks it (upstream.Cancel.Reset); a held lock is no state
	case exchangeT: // released to its pool by release: a real one
		v.Set(reflect.ValueOf(upstream.AcquireExchange()))
		return
	case translatorT:
		v.Set(reflect.ValueOf(translate.Get(dia.Messages, dia.Chat, translate.Options{})))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fillValue(t, v.Index(i), path)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillValue(t, s.Index(0), path+"[]")
		v.Set(s)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem())) // not followed: release gives pointers back, it does not clear what they point to
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, v.Type().NumOut())
			for i := range out {
				out[i] = reflect.Zero(v.Type().Out(i))
			}
			return out
		}))
	case reflect.Interface:
		switch v.Type() {
		case contextType:
			v.Set(reflect.ValueOf(context.Background()))
		case spanType:
			v.Set(reflect.ValueOf(trace.SpanFromContext(context.Background())))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fillValue(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	}
}

// compareValue reports every difference between got (released after
// being filled) and want (released empty); slices are equal when both
// are empty, whatever their capacity. It returns how many leaves it
// compared.
func compareValue(t *testing.T, got, want reflect.Value, path string) int {
	if keptOnPurpose[path] {
		return 0
	}
	got, want = settable(got), settable(want)
	switch got.Kind() {
	case reflect.Slice:
		if got.Len() != 0 || want.Len() != 0 {
			t.Errorf("%s: release left %d elements (a fresh call has %d)", path, got.Len(), want.Len())
		}
		return 1
	case reflect.Array:
		n := 0
		for i := 0; i < got.Len(); i++ {
			n += compareValue(t, got.Index(i), want.Index(i), path)
		}
		return n
	case reflect.Struct:
		n := 0
		for i := 0; i < got.NumField(); i++ {
			n += compareValue(t, got.Field(i), want.Field(i), path+"."+got.Type().Field(i).Name)
		}
		return n
	case reflect.Func, reflect.Map, reflect.Chan, reflect.Pointer, reflect.Interface, reflect.UnsafePointer:
		if got.IsNil() != want.IsNil() || (got.Kind() == reflect.Pointer && got.Pointer() != want.Pointer()) {
			t.Errorf("%s: release left %v", path, got)
		}
		return 1
	}
	if !got.Equal(want) {
		t.Errorf("%s: release left %v (a fresh call has %v)", path, got, want)
	}
	return 1
}

// TestWalkDocumented requires docs/architecture.md's walk of one request
// to name the walk's steps in the order the code runs them.
func TestWalkDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## The walk of one request through the stages")
	if start < 0 {
		t.Fatal("docs/architecture.md has no section \"The walk of one request through the stages\"")
	}
	doc = doc[start:]
	if end := strings.Index(doc[3:], "\n## "); end >= 0 {
		doc = doc[:end+3]
	}
	for _, w := range []struct {
		name  string
		steps []step
	}{{"entryWalk", entryWalk[:]}, {"modelWalk", modelWalk[:]}, {"countWalk", countWalk[:]}, {"relayWalk", relayWalk[:]}} {
		at := strings.Index(doc, "`"+w.name+"`")
		if at < 0 {
			t.Errorf("the section does not name %s", w.name)
			continue
		}
		rest := doc[at:]
		for _, s := range w.steps {
			name := runtime.FuncForPC(reflect.ValueOf(s).Pointer()).Name()
			name = name[strings.LastIndexByte(name, '.')+1:]
			i := strings.Index(rest, "`"+name+"`")
			if i < 0 {
				t.Errorf("%s: step %s is not named after the steps before it", w.name, name)
				continue
			}
			rest = rest[i:]
		}
	}
}
