package tenancy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/monky/monky-deployd/deployd/ids"
	"github.com/monky/monky-deployd/deployd/secret"
)

// checkinWire is the check-in response as it travels. Pointers tell a missing field
// from a zero one.
type checkinWire struct {
	Action       *string `json:"action"`
	SHA          *string `json:"sha"`
	Serial       *int64  `json:"serial"`
	Purge        *bool   `json:"purge"`
	Retry        *bool   `json:"retry"`
	Rollback     *bool   `json:"rollback"`
	NextCheckinS *int64  `json:"next_checkin_s"`
	OverrideHold *bool   `json:"override_hold"`
}

// maxNextCheckin bounds next_checkin_s: a day, more is a server bug.
const maxNextCheckin = 24 * 60 * 60

// decodeInstruction decodes and validates a check-in response. Errors are *APIError
// of kind ErrProtocol naming the field.
func decodeInstruction(data []byte) (Instruction, error) {
	var w checkinWire
	if err := unmarshalObject(data, &w); err != nil {
		return Instruction{}, err
	}
	if w.Action == nil {
		return Instruction{}, protocolError("field action is missing")
	}
	ins := Instruction{Action: Action(*w.Action)}
	if w.NextCheckinS != nil {
		if *w.NextCheckinS < 0 || *w.NextCheckinS > maxNextCheckin {
			return Instruction{}, protocolError(fmt.Sprintf("field next_checkin_s %d is outside 0..%d", *w.NextCheckinS, maxNextCheckin))
		}
		ins.NextCheckin = time.Duration(*w.NextCheckinS) * time.Second
	}
	switch ins.Action {
	case ActionApply:
		if w.SHA == nil || !ids.ValidSHA(*w.SHA) {
			return Instruction{}, protocolError("field sha must be 64 lowercase hex with action apply")
		}
		if w.Serial == nil || *w.Serial < 1 {
			return Instruction{}, protocolError("field serial must be ≥ 1 with action apply")
		}
		ins.SHA, ins.Serial = *w.SHA, *w.Serial
		ins.Retry = w.Retry != nil && *w.Retry
		ins.Rollback = w.Rollback != nil && *w.Rollback
		ins.OverrideHold = w.OverrideHold != nil && *w.OverrideHold
	case ActionDown:
		ins.Purge = w.Purge != nil && *w.Purge
	case ActionNone:
	default:
		return Instruction{}, protocolError("field action " + quoteField(*w.Action) + " is not apply, none or down")
	}
	return ins, nil
}

// leaseWire is the lease response as it travels.
type leaseWire struct {
	Grant     *string `json:"grant"`
	AuthMount *string `json:"auth_mount"`
	Role      *string `json:"role"`
	ExpiresAt *string `json:"expires_at"`
}

// refusedLeaseFields are the fields of an AppRole or response-wrapped lease.
var refusedLeaseFields = []string{"role_id", "secret_id", "wrap_info", "wrapping_token"}

// decodeLease decodes and validates a lease. The grant, and any secret of a refused
// shape, is added to reg before anything else is checked.
func decodeLease(data []byte, wantMount, wantRole string, now time.Time, reg secret.Registry) (Lease, error) {
	var raw map[string]json.RawMessage
	if err := unmarshalObject(data, &raw); err != nil {
		return Lease{}, err
	}
	registerSecrets(raw, reg, 0)
	// Keys are compared with Unicode case folding, as encoding/json matches struct
	// fields: "Secret_ID" (or "ſecret_id") is as much an AppRole field as "secret_id".
	var refused []string
	for _, f := range refusedLeaseFields {
		for k := range raw {
			if strings.EqualFold(k, f) {
				refused = append(refused, f)
				break
			}
		}
	}
	if len(refused) > 0 {
		return Lease{}, leaseError(fmt.Sprintf("the lease has AppRole or response-wrapped fields (%s): there is no AppRole path and nothing to unwrap", strings.Join(refused, ", ")))
	}
	var w leaseWire
	if err := unmarshalObject(data, &w); err != nil {
		return Lease{}, err
	}
	if w.Grant == nil || *w.Grant == "" {
		return Lease{}, leaseError("field grant is missing")
	}
	if err := checkJWTShape(*w.Grant); err != nil {
		return Lease{}, leaseError("field grant is not a JWT: " + err.Error())
	}
	if w.AuthMount == nil || *w.AuthMount != wantMount {
		return Lease{}, leaseError(fmt.Sprintf("field auth_mount is %s, want %q", optQuote(w.AuthMount), wantMount))
	}
	if w.Role == nil || *w.Role != wantRole {
		return Lease{}, leaseError(fmt.Sprintf("field role is %s, want %q", optQuote(w.Role), wantRole))
	}
	if w.ExpiresAt == nil {
		return Lease{}, leaseError("field expires_at is missing")
	}
	exp, err := time.Parse(time.RFC3339, *w.ExpiresAt)
	if err != nil {
		return Lease{}, leaseError("field expires_at " + quoteField(*w.ExpiresAt) + " is not RFC 3339")
	}
	if !exp.After(now) {
		return Lease{}, leaseError("field expires_at " + exp.UTC().Format(time.RFC3339) + " is not in the future")
	}
	return Lease{Grant: secret.New(*w.Grant), AuthMount: *w.AuthMount, Role: *w.Role, ExpiresAt: exp}, nil
}

// secretKeys are the keys whose string values are secrets, at any depth of a lease.
var secretKeys = map[string]bool{
	"grant": true, "secret_id": true, "wrapping_token": true, "token": true, "client_token": true,
}

// isSecretKey reports whether k is one of secretKeys under Unicode case folding.
func isSecretKey(k string) bool {
	for sk := range secretKeys {
		if strings.EqualFold(k, sk) {
			return true
		}
	}
	return false
}

// registerSecrets adds to reg the string value of every key of secretKeys found in
// raw, at any depth and in any case (encoding/json matches fields case-insensitively),
// so that a secret of a refused shape cannot leak either.
func registerSecrets(raw map[string]json.RawMessage, reg secret.Registry, depth int) {
	if depth > 8 {
		return
	}
	for k, v := range raw {
		var s string
		if isSecretKey(k) && json.Unmarshal(v, &s) == nil {
			reg.Add(s)
			continue
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) == nil {
			registerSecrets(obj, reg, depth+1)
		}
	}
}

// checkJWTShape checks three base64url segments whose first decodes to a JSON object
// with a non-empty "alg".
func checkJWTShape(s string) error {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return fmt.Errorf("%d segments, want 3", len(parts))
	}
	for i, p := range parts {
		if p == "" && i < 2 {
			return fmt.Errorf("segment %d is empty", i+1)
		}
		if _, err := base64.RawURLEncoding.DecodeString(p); err != nil {
			return fmt.Errorf("segment %d is not base64url", i+1)
		}
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
	var h struct {
		Alg any `json:"alg"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return errors.New("the header is not a JSON object")
	}
	alg, ok := h.Alg.(string)
	if !ok || alg == "" {
		return errors.New("the header has no alg")
	}
	return nil
}

func optQuote(p *string) string {
	if p == nil {
		return "missing"
	}
	return quoteField(*p)
}

// errorWire is the error body: {"error":{"code":"…","message":"…"}}.
type errorWire struct {
	Error *struct {
		Code    any `json:"code"`
		Message any `json:"message"`
	} `json:"error"`
}

// decodeErrorBody returns error.code and error.message of an error body, or "" for
// what is missing or not a string. The caller sanitises both.
func decodeErrorBody(data []byte) (code, message string) {
	var w errorWire
	if json.Unmarshal(data, &w) != nil || w.Error == nil {
		return "", ""
	}
	code, _ = w.Error.Code.(string)
	message, _ = w.Error.Message.(string)
	return code, message
}

// unmarshalObject decodes a JSON object; a decode failure is a protocol error that names
// the field, never its value.
func unmarshalObject(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return protocolError("the response is not a JSON object")
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			kind, _, _ := strings.Cut(te.Value, " ")
			return protocolError(fmt.Sprintf("field %s has JSON type %s, want %s", quoteField(te.Field), kind, te.Type))
		}
		return protocolError("the response is not valid JSON")
	}
	return nil
}

func protocolError(msg string) *APIError { return &APIError{Kind: ErrProtocol, Message: msg} }

func leaseError(msg string) *APIError { return &APIError{Kind: ErrLeaseShape, Message: msg} }
