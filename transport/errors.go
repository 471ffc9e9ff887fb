package transport

import (
	"strconv"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
)

// formatFor picks the error dialect of a surface.
func formatFor(s catalog.Surface) apierror.Format {
	if s == catalog.Messages {
		return apierror.Anthropic
	}
	return apierror.OpenAI
}

// The pipeline's own errors (the edge's are in edge/errors.go).
// Messages say what failed and what to do.
var (
	errMediaType = apierror.New(apierror.CodeUnsupportedMediaType,
		"Content-Type must be application/json, and is required (with curl, add -H 'Content-Type: application/json')")
	errMissingKey   = apierror.New(apierror.CodeMissingAPIKey)
	errInvalidKey   = apierror.New(apierror.CodeInvalidAPIKey, "the API key is not configured on this gateway")
	errDraining     = apierror.New(apierror.CodeShuttingDown, "the gateway is shutting down; retry against another instance").Retry(1)
	errMissingModel = apierror.New(apierror.CodeMissingModel)
	errEmptyBody    = apierror.New(apierror.CodeEmptyBody)
)

func errUnknownModel(name []byte) *apierror.Error {
	return apierror.New(apierror.CodeModelNotFound, string(name))
}

func errWrongSurface(m *catalog.Model, s catalog.Surface) *apierror.Error {
	if !s.Translated() {
		return apierror.New(apierror.CodeUnsupportedAPIFormat, "model "+strconv.Quote(m.Name)+" has no target whose provider serves "+s.String()+" ("+s.Route()+
			" is passed through, never translated); use a model on a provider that lists \""+s.String()+
			"\" in its apis (an OpenAI-compatible endpoint; Anthropic-dialect providers have none)")
	}
	msg := "model " + strconv.Quote(m.Name) + " is served only through "
	for i, n := range m.Surfaces.Names() {
		if i > 0 {
			msg += ", "
		}
		msg += (surfaceByName(n)).Route()
	}
	msg += "; call that endpoint, or add a target whose provider speaks " + s.String() + " or another translated API"
	return apierror.New(apierror.CodeUnsupportedAPIFormat, msg)
}

func surfaceByName(n string) catalog.Surface {
	for _, s := range catalog.Surfaces {
		if s.String() == n {
			return s
		}
	}
	return 0
}
