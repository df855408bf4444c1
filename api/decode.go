package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
)

// MaxBodyBytes bounds every request body of the admin API.
const MaxBodyBytes = 1 << 20

func badJSON(format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_json", format, args...)
}

// decode reads the request body into v strictly: the content type must be
// application/json, the body at most MaxBodyBytes, a single JSON value
// with no unknown fields and no trailing data, and no string holding a NUL
// byte. Errors name the offending field, never echo a value.
func decode(c echo.Context, v any) error {
	r := c.Request()
	mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEApplicationJSON {
		return echo.NewHTTPError(http.StatusUnsupportedMediaType)
	}
	if r.ContentLength > MaxBodyBytes {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, MaxBodyBytes))
	if err != nil {
		if tooLarge(err) {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
		}
		return badJSON("the request body could not be read")
	}
	if err := checkBodyText(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			if tooLarge(err) {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
			}
		}
		return badJSON("unexpected data after the JSON value")
	}
	return nil
}

func tooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// decodeError turns a json decoding error into a client error naming the
// field, without the value.
func decodeError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case tooLarge(err):
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
	case errors.Is(err, io.EOF):
		return badJSON("the request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badJSON("the request body is truncated JSON")
	case errors.As(err, &syn):
		return badJSON("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badJSON("the request body must be a JSON %s", jsonType(typ.Type))
		}
		return badJSON("field %q must be a JSON %s", typ.Field, jsonType(typ.Type))
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badJSON("unknown field %s", f)
	}
	// An UnmarshalJSON error of a field type (such as a secret value that
	// is not a string). Its text is ours and holds no value.
	return badJSON("invalid request body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return fmt.Sprintf("value of type %s", t.Kind())
}
