package quota

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/omniroute/gateway/messages"
)

// Provider usage APIs (source provider_api). Each parser takes the response
// body of one endpoint and returns values; expires is when they stop being
// evidence (the poller's freshness horizon).

// Poller kinds.
const (
	PollOpenRouter = "openrouter"
	PollDeepSeek   = "deepseek"
)

// PollKinds lists the supported provider usage APIs.
func PollKinds() []string { return []string{PollOpenRouter, PollDeepSeek} }

// maxAPIBody bounds what a usage API may answer.
const maxAPIBody = 1 << 20

func decodeAPI(body []byte, v any) error {
	if len(body) > maxAPIBody {
		return fmt.Errorf("answer is larger than %d bytes", maxAPIBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("answer is not the expected JSON: %v", err)
	}
	return nil
}

// num reads a JSON number or numeric string; ok is false for null, absent
// or non-finite values.
func num(raw json.RawMessage) (float64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		raw = []byte(s)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// ParseOpenRouterKey reads GET /api/v1/key: the key's credit limit, what is
// left of it and its usage, plus the free-model daily request allowance.
func ParseOpenRouterKey(body []byte, now, expires time.Time) ([]Value, error) {
	var doc struct {
		Data *struct {
			Limit          json.RawMessage `json:"limit"`
			LimitRemaining json.RawMessage `json:"limit_remaining"`
			LimitReset     *string         `json:"limit_reset"`
			Usage          json.RawMessage `json:"usage"`
			FreeDaily      *struct {
				Used      json.RawMessage `json:"used"`
				Limit     json.RawMessage `json:"limit"`
				Remaining json.RawMessage `json:"remaining"`
			} `json:"free_model_daily_requests"`
		} `json:"data"`
	}
	if err := decodeAPI(body, &doc); err != nil {
		return nil, err
	}
	if doc.Data == nil {
		return nil, errors.New(`answer has no "data" object`)
	}
	d := doc.Data
	v := Value{Dimension: messages.DimCredits, Unit: "USD", Source: SourceProviderAPI, Confidence: ConfidenceAuthoritative, Expires: expires}
	v.setNumbers(d.Limit, d.LimitRemaining, d.Usage)
	// Usage is lifetime spend; it exhausts nothing unless a limit that
	// resets never applies, so compare only against the remaining.
	if v.Known(HasUsed) && v.Known(HasLimit) && d.LimitReset != nil && *d.LimitReset != "" {
		v.Flags &^= HasUsed
	}
	if d.LimitReset != nil {
		if t, ok := nextReset(*d.LimitReset, now); ok {
			v.ResetAt = t
		}
	}
	out := []Value{v}
	if fd := d.FreeDaily; fd != nil {
		dv := Value{Dimension: messages.DimDailyRequests, Unit: "requests", Source: SourceProviderAPI, Confidence: ConfidenceAuthoritative, Expires: expires}
		dv.setNumbers(fd.Limit, fd.Remaining, fd.Used)
		if dv.Flags != 0 {
			dv.ResetAt, _ = nextReset("daily", now)
			out = append(out, dv)
		}
	}
	return out, nil
}

// setNumbers takes the limit, remaining and used of an API answer, each
// flagged known only when it is a number.
func (v *Value) setNumbers(limit, remaining, used json.RawMessage) {
	if f, ok := num(limit); ok {
		v.Limit, v.Flags = f, v.Flags|HasLimit
	}
	if f, ok := num(remaining); ok {
		v.Remaining, v.Flags = f, v.Flags|HasRemaining
	}
	if f, ok := num(used); ok {
		v.Used, v.Flags = f, v.Flags|HasUsed
	}
}

// nextReset returns the next UTC boundary of an OpenRouter limit_reset.
func nextReset(period string, now time.Time) (time.Time, bool) {
	u := now.UTC()
	day := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	switch period {
	case "daily":
		return day.AddDate(0, 0, 1), true
	case "weekly":
		days := (8 - int(day.Weekday())) % 7 // next Monday
		if days == 0 {
			days = 7
		}
		return day.AddDate(0, 0, days), true
	case "monthly":
		return time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0), true
	}
	return time.Time{}, false
}

// ParseOpenRouterCredits reads GET /api/v1/credits: the account's
// purchased credits and total usage; the balance is their difference.
func ParseOpenRouterCredits(body []byte, expires time.Time) ([]Value, error) {
	var doc struct {
		Data *struct {
			TotalCredits json.RawMessage `json:"total_credits"`
			TotalUsage   json.RawMessage `json:"total_usage"`
		} `json:"data"`
	}
	if err := decodeAPI(body, &doc); err != nil {
		return nil, err
	}
	if doc.Data == nil {
		return nil, errors.New(`answer has no "data" object`)
	}
	credits, ok1 := num(doc.Data.TotalCredits)
	usage, ok2 := num(doc.Data.TotalUsage)
	if !ok1 || !ok2 {
		return nil, errors.New("answer lacks total_credits or total_usage")
	}
	return []Value{{Dimension: messages.DimCurrency, Unit: "USD", Source: SourceProviderAPI, Confidence: ConfidenceAuthoritative,
		Flags: HasLimit | HasUsed | HasRemaining, Limit: credits, Used: usage, Remaining: credits - usage, Expires: expires}}, nil
}

// ParseDeepSeekBalance reads GET /user/balance. is_available false means
// the account cannot serve requests: exhausted whatever the balance says.
func ParseDeepSeekBalance(body []byte, expires time.Time) ([]Value, error) {
	var doc struct {
		IsAvailable  *bool `json:"is_available"`
		BalanceInfos []struct {
			Currency     string          `json:"currency"`
			TotalBalance json.RawMessage `json:"total_balance"`
		} `json:"balance_infos"`
	}
	if err := decodeAPI(body, &doc); err != nil {
		return nil, err
	}
	if doc.IsAvailable == nil {
		return nil, errors.New(`answer has no "is_available"`)
	}
	v := Value{Dimension: messages.DimCurrency, Source: SourceProviderAPI, Confidence: ConfidenceAuthoritative, Expires: expires}
	if len(doc.BalanceInfos) > 0 {
		b := doc.BalanceInfos[0]
		if len(b.Currency) <= 8 {
			v.Unit = b.Currency
		}
		if f, ok := num(b.TotalBalance); ok {
			v.Remaining, v.Flags = f, HasRemaining
		}
	}
	if !*doc.IsAvailable {
		v.Remaining, v.Flags = 0, v.Flags|HasRemaining
	}
	return []Value{v}, nil
}
