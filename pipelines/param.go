package pipelines

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
)

// ParamType is the type of a kind's parameter.
type ParamType int

// The parameter types. Bytes accept a size in the grammar of internal/bytesize
// (a number with an optional binary unit: K, M, G, T, P, E, also spelled KiB …
// EiB, in any case) or one of the parameter's words; Duration a Go duration
// ("50ms"); Enum one of the declared words.
const (
	String ParamType = iota
	Int
	Float
	Bool
	Bytes
	Duration
	Enum
	StringList
)

var paramTypeNames = [...]string{"string", "int", "float", "bool", "bytes", "duration", "enum", "list of strings"}

func (t ParamType) String() string {
	if int(t) < len(paramTypeNames) {
		return paramTypeNames[t]
	}
	return "ParamType(" + strconv.Itoa(int(t)) + ")"
}

// Param declares one parameter of a kind: its name, type, default, range and one
// line of documentation. Build params with [IntParam], [StringParam] and the
// other constructors.
type Param struct {
	Name string
	Type ParamType
	Doc  string
	// Default is the value when the file does not set it: string, int64,
	// float64, bool, int64 (Bytes), time.Duration or []string by Type. Ignored
	// when Required.
	Default  any
	Required bool
	// Min and Max bound Int, Float, Bytes and Duration values (Duration in
	// nanoseconds) when HasRange.
	HasRange bool
	Min, Max float64
	// Values lists the words an Enum accepts.
	Values []string
	// Words are the words a Bytes parameter accepts besides sizes ("max": -1).
	Words map[string]int64
}

// WithWords returns p accepting the words besides sizes (Bytes parameters).
func (p Param) WithWords(words map[string]int64) Param { p.Words = words; return p }

func sortedWords(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for w := range m {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// StringParam declares a string parameter.
func StringParam(name, def, doc string) Param {
	return Param{Name: name, Type: String, Default: def, Doc: doc}
}

// IntParam declares an integer parameter within [min, max].
func IntParam(name string, def, min, max int64, doc string) Param {
	return Param{Name: name, Type: Int, Default: def, Doc: doc, HasRange: true, Min: float64(min), Max: float64(max)}
}

// FloatParam declares a floating-point parameter within [min, max].
func FloatParam(name string, def, min, max float64, doc string) Param {
	return Param{Name: name, Type: Float, Default: def, Doc: doc, HasRange: true, Min: min, Max: max}
}

// BoolParam declares a boolean parameter.
func BoolParam(name string, def bool, doc string) Param {
	return Param{Name: name, Type: Bool, Default: def, Doc: doc}
}

// BytesParam declares a byte size within [min, max].
func BytesParam(name string, def, min, max int64, doc string) Param {
	return Param{Name: name, Type: Bytes, Default: def, Doc: doc, HasRange: true, Min: float64(min), Max: float64(max)}
}

// DurationParam declares a duration within [min, max].
func DurationParam(name string, def, min, max time.Duration, doc string) Param {
	return Param{Name: name, Type: Duration, Default: def, Doc: doc, HasRange: true, Min: float64(min), Max: float64(max)}
}

// EnumParam declares a parameter that takes one of values; def must be one of them.
func EnumParam(name, def string, values []string, doc string) Param {
	return Param{Name: name, Type: Enum, Default: def, Doc: doc, Values: values}
}

// StringListParam declares a list of strings.
func StringListParam(name string, def []string, doc string) Param {
	return Param{Name: name, Type: StringList, Default: def, Doc: doc}
}

// Require marks p as required (it has no default).
func (p Param) Require() Param { p.Required = true; p.Default = nil; return p }

// check reports a declaration mistake in p.
func (p Param) check() error {
	if p.Name == "" || p.Doc == "" {
		return fmt.Errorf("parameter %q: needs a name and one line of documentation", p.Name)
	}
	if p.Required {
		return nil
	}
	ok := false
	switch p.Type {
	case String:
		_, ok = p.Default.(string)
	case Int, Bytes:
		_, ok = p.Default.(int64)
	case Float:
		_, ok = p.Default.(float64)
	case Bool:
		_, ok = p.Default.(bool)
	case Duration:
		_, ok = p.Default.(time.Duration)
	case Enum:
		var s string
		s, ok = p.Default.(string)
		ok = ok && contains(p.Values, s)
	case StringList:
		_, ok = p.Default.([]string)
	}
	if !ok {
		return fmt.Errorf("parameter %q: default %v (%T) does not fit type %s", p.Name, p.Default, p.Default, p.Type)
	}
	return nil
}

// DefaultString formats the default for documentation.
func (p Param) DefaultString() string {
	if p.Required {
		return "required"
	}
	switch v := p.Default.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		for _, w := range sortedWords(p.Words) {
			if p.Words[w] == v {
				return w
			}
		}
		if p.Type == Bytes {
			return bytesize.Format(v)
		}
		return strconv.FormatInt(v, 10)
	case []string:
		return "[" + strings.Join(v, ", ") + "]"
	default:
		return fmt.Sprint(v)
	}
}

// RangeString formats the accepted values for documentation ("" when any).
func (p Param) RangeString() string {
	switch {
	case p.Type == Enum:
		return strings.Join(p.Values, " | ")
	case !p.HasRange:
		return ""
	}
	f := func(v float64) string {
		switch p.Type {
		case Bytes:
			if v >= math.MaxInt64 {
				return "∞"
			}
			return bytesize.Format(int64(v))
		case Duration:
			return time.Duration(v).String()
		case Int:
			if v >= math.MaxInt64 {
				return "∞"
			}
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return f(p.Min) + " … " + f(p.Max)
}
