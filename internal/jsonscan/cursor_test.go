package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// walk consumes one value with the cursor's structural methods (never Skip
// for containers), so every path through Key and Next is exercised.
func walk(c *Cursor, out *strings.Builder) {
	switch c.Peek() {
	case '{':
		c.Object()
		out.WriteByte('{')
		n := 0
		for k, ok := c.Key(); ok; k, ok = c.Key() {
			if n > 0 {
				out.WriteByte(',')
			}
			n++
			out.WriteString(strings.ToUpper(string(k)))
			out.WriteByte(':')
			walk(c, out)
		}
		out.WriteByte('}')
	case '[':
		c.Array()
		out.WriteByte('[')
		n := 0
		for c.Next() {
			if n > 0 {
				out.WriteByte(',')
			}
			n++
			walk(c, out)
		}
		out.WriteByte(']')
	case '"':
		t, _ := c.Text()
		out.WriteString("s" + string(t))
	case 't', 'f':
		v, _ := c.Bool()
		if v {
			out.WriteString("T")
		} else {
			out.WriteString("F")
		}
	case 'n':
		c.Null()
		out.WriteString("N")
	default:
		if c.Number() == nil {
			c.Skip() // records the error for a stray byte
		}
		out.WriteString("#")
	}
}

func TestCursorWalk(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{` { "a" : [ 1 , "x\u0041" , { } , [ ] ] , "b\u0063" : null , "t":true } `, `{A:[#,sxA,{},[]],BC:N,T:T}`},
		{`[]`, `[]`},
		{`"s"`, `ss`},
		{`-1.5e3`, `#`},
	} {
		var c Cursor
		c.Reset([]byte(tc.in))
		var b strings.Builder
		walk(&c, &b)
		if err := c.End(); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: walked %s, want %s", tc.in, b.String(), tc.want)
		}
	}
	for _, bad := range []string{`{,}`, `{"a":1,}`, `[1,]`, `[,1]`, `{"a" 1}`, `{"a":1 "b":2}`, `[1 2]`, `{"a":1`, `[`, `{"a":1}}`, `"\x01"`, `01`, `{"a":tru}`, ``} {
		var c Cursor
		c.Reset([]byte(bad))
		var b strings.Builder
		walk(&c, &b)
		if c.End() == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCursorScalars(t *testing.T) {
	var c Cursor
	c.Reset([]byte(`{"n":42,"f":1.5,"s":"a\"b","big":99999999999999999999,"o":{"x":[1]}}`))
	c.Object()
	for k, ok := c.Key(); ok; k, ok = c.Key() {
		switch string(k) {
		case "n":
			if n, ok := c.Int(); !ok || n != 42 {
				t.Errorf("n = %d %v", n, ok)
			}
		case "f":
			if n, ok := c.Int(); ok {
				t.Errorf("1.5 read as int %d", n)
			}
		case "s":
			if raw := c.Str(); string(raw) != `"a\"b"` {
				t.Errorf("raw = %s", raw)
			}
		case "big":
			if _, ok := c.Int(); ok {
				t.Error("out-of-range int accepted")
			}
		case "o":
			if raw := c.Skip(); string(raw) != `{"x":[1]}` {
				t.Errorf("skip = %s", raw)
			}
		}
	}
	if err := c.End(); err != nil {
		t.Fatal(err)
	}
	c.Reset([]byte(`[1]`))
	if c.Object() || c.Err() != nil || c.Peek() != '[' {
		t.Fatal("Object on an array must report false and leave the array")
	}
	c.Reset([]byte(`}`))
	if c.Object() || c.Err() == nil {
		t.Fatal("Object on a stray byte must record a syntax error")
	}
	c.Reset([]byte(strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)))
	var b strings.Builder
	walk(&c, &b)
	if c.End() == nil {
		t.Fatal("depth limit not enforced")
	}
}

// FuzzCursor: a structural walk accepts exactly the documents encoding/json
// accepts (within the depth bound) and never panics.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}]}`, `[1,]`, `"\ud83d\ude00"`, `{"a":1}x`, ` 1 `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var c Cursor
		c.Reset(doc)
		var b strings.Builder
		walk(&c, &b)
		got := c.End() == nil
		want := json.Valid(doc)
		if got != want && strings.Count(string(doc), "[")+strings.Count(string(doc), "{") < MaxDepth {
			t.Fatalf("cursor valid=%v, encoding/json valid=%v for %q", got, want, doc)
		}
	})
}
