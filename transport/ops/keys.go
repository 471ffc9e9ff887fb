package ops

import (
	"errors"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/sanitize"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/transport/edge"
)

// The key API (docs/tenants.md, "Key lifecycle"):
//
//	GET  /api/keys                  every key, config-file tenants included; never a secret
//	POST /api/keys                  {"name", policy fields…} → 201, the secret shown once
//	GET  /api/keys/{name}           one key
//	POST /api/keys/{name}/policy    {policy fields…}: the new policy, in force on the next request
//	POST /api/keys/{name}/rotate    a new secret, shown once; the old one stops working
//	POST /api/keys/{name}/revoke    the key stops working, for good
//
// Every route is behind the management guard (Edge.Management) and the
// edge's browser policy; bodies are strict JSON: unknown fields,
// wrong types, negative limits, model patterns that match no model and
// duplicate names are 400 with the field named.

const (
	// KeysPath is the key API's root; its keys are under KeysPath + "/".
	KeysPath   = edge.KeysPath
	keysPrefix = KeysPath + "/"
	// maxKeyBody bounds a key body (a policy lists at most 256 models).
	maxKeyBody = 64 << 10
)

// keyView is a key as the API shows it, with the secret only when it was
// just made.
type keyView struct {
	Key    ikeys.Info `json:"key"`
	Secret string     `json:"secret,omitempty"`
}

// Keys serves the key API.
func (a *API) Keys(ctx *fasthttp.RequestCtx, edgeRID []byte) {
	rid := own(edgeRID)
	if !a.edge.Management(ctx, rid) {
		return
	}
	kh := a.keys
	path := string(ctx.Path())
	if path == KeysPath {
		switch {
		case ctx.IsGet():
			writeJSON(ctx, 200, map[string]any{"keys": kh.Snapshot().Infos()})
		case ctx.IsPost():
			body, ok := a.keyBody(ctx, rid)
			if !ok {
				return
			}
			name, p, err := ikeys.DecodeCreate(body)
			if err == nil {
				err = a.checkPolicyModels(p)
			}
			if err != nil {
				writeKeyError(ctx, rid, err)
				return
			}
			info, secret, err := kh.Create(name, p)
			if err != nil {
				writeKeyError(ctx, rid, err)
				return
			}
			writeJSON(ctx, 201, keyView{Key: info, Secret: secret})
		default:
			methodNotAllowed(ctx, rid, "GET, POST")
		}
		return
	}
	name, action, _ := strings.Cut(path[len(keysPrefix):], "/")
	if name == "" {
		WriteError(ctx, rid, apierror.CodeNotFound, "no key name in the path; use /api/keys/{name}")
		return
	}
	if err := ikeys.ValidateName(name); err != nil {
		WriteError(ctx, rid, apierror.CodeKeyNotFound, "no key named "+sanitize.Message(name, "?")+"; GET /api/keys lists the keys")
		return
	}
	switch action {
	case "":
		if !ctx.IsGet() {
			methodNotAllowed(ctx, rid, "GET")
			return
		}
		info, ok := kh.Snapshot().Info(name)
		if !ok {
			WriteError(ctx, rid, apierror.CodeKeyNotFound, "no key named "+name+"; GET /api/keys lists the keys")
			return
		}
		writeJSON(ctx, 200, keyView{Key: info})
		return
	case "policy", "rotate", "revoke":
	default:
		WriteError(ctx, rid, apierror.CodeNotFound, "no action "+sanitize.Message(action, "?")+" for a key; use policy, rotate or revoke")
		return
	}
	if !ctx.IsPost() {
		methodNotAllowed(ctx, rid, "POST")
		return
	}
	var info ikeys.Info
	var secret string
	var err error
	switch action {
	case "policy":
		body, ok := a.keyBody(ctx, rid)
		if !ok {
			return
		}
		var p tenantpolicy.Policy
		if p, err = ikeys.DecodePolicy(body); err == nil {
			if err = a.checkPolicyModels(p); err == nil {
				info, err = kh.UpdatePolicy(name, p)
			}
		}
	case "rotate", "revoke":
		if !a.edge.Body(ctx, rid) {
			return
		}
		if action == "rotate" {
			info, secret, err = kh.Rotate(name)
		} else {
			info, err = kh.Revoke(name)
		}
	}
	if err != nil {
		writeKeyError(ctx, rid, err)
		return
	}
	writeJSON(ctx, 200, keyView{Key: info, Secret: secret})
}

// keyBody reads a key body: JSON, at most maxKeyBody.
func (a *API) keyBody(ctx *fasthttp.RequestCtx, rid []byte) ([]byte, bool) {
	if !a.edge.JSON(ctx) {
		e := apierror.New(apierror.CodeUnsupportedMediaType, "a key body is JSON: send Content-Type: application/json")
		edge.WriteManagementError(ctx, rid, e.Status, e.Type, e.Code, e.Message)
		return nil, false
	}
	body, tooLarge := readLimited(ctx, maxKeyBody)
	if tooLarge {
		ctx.SetConnectionClose()
		WriteError(ctx, rid, apierror.CodePayloadTooLarge, "a key body may not exceed 64 KiB")
		return nil, false
	}
	return body, true
}

// checkPolicyModels refuses allowed_models entries that match none of the
// gateway's models, and token windows a request without max_tokens could
// never fit.
func (a *API) checkPolicyModels(p tenantpolicy.Policy) error {
	if err := a.keys.CheckPolicy(p); err != nil {
		var fe tenantpolicy.FieldError
		errors.As(err, &fe)
		return ikeys.NewError(apierror.CodeInvalidPolicy, fe.Path, fe.Error())
	}
	return nil
}

// writeKeyError answers a refused key operation: the management error
// body with the field to blame, {"error":{"message","type","code","field"},"requestId"}.
func writeKeyError(ctx *fasthttp.RequestCtx, rid []byte, err error) {
	var ke *ikeys.Error
	if !errors.As(err, &ke) {
		ke = ikeys.NewError(apierror.CodeInternalError, "", sanitize.Message(err.Error(), "the key operation failed"))
	}
	edge.WriteManagementFieldError(ctx, rid, ke.Status, "", ke.Code, ke.Field, ke.Message)
}
