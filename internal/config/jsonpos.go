package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// unknownField finds the first object key in data that the Go type root
// has no field for, walking the document and the type together (map keys
// are free, struct keys must name a field, json.Unmarshaler values are
// opaque). It returns the key's JSON path and byte offset, so the error
// for a misspelt field can say where it is: encoding/json's own error
// names the key only.
func unknownField(data []byte, root reflect.Type) (path string, offset int64, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	w := walker{dec: dec}
	w.value(root, "")
	return w.path, w.offset, w.found
}

type walker struct {
	dec    *json.Decoder
	found  bool
	path   string
	offset int64
	err    error
}

var (
	jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// value walks one JSON value of Go type t (nil: anything) at path.
func (w *walker) value(t reflect.Type, path string) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		t = nil // decoded by its own rules
	}
	tok, err := w.dec.Token()
	if err != nil {
		w.err = err
		return
	}
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return
	}
	switch d {
	case '{':
		for w.dec.More() && !w.found && w.err == nil {
			k, err := w.dec.Token()
			if err != nil {
				w.err = err
				return
			}
			key, _ := k.(string)
			child := key
			if path != "" {
				child = path + "." + key
			}
			var next reflect.Type
			switch {
			case t == nil || t.Kind() == reflect.Interface:
			case t.Kind() == reflect.Map:
				next = t.Elem()
			case t.Kind() == reflect.Struct:
				f, ok := jsonField(t, key)
				if !ok {
					w.found, w.path = true, child
					w.offset = w.dec.InputOffset() - int64(len(key)) - 2
					return
				}
				next = f
			}
			w.value(next, child)
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More() && !w.found && w.err == nil; i++ {
			w.value(elem, fmt.Sprintf("%s[%d]", path, i))
		}
	}
	if !w.found && w.err == nil {
		_, w.err = w.dec.Token() // the closing delimiter
	}
}

// jsonField returns the type of the struct field that key decodes into,
// matching names as encoding/json does (tag name, else field name, case
// insensitively; embedded structs' fields count).
func jsonField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if inner, ok := jsonField(ft, key); ok {
					return inner, true
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f.Type, true
		}
	}
	return nil, false
}
