package transport

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/actors/lanes"
	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/failure"
	"github.com/omniroute/gateway/internal/fusion"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/admit"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/upstream"
)

type panelMember struct {
	t      *catalog.Target
	lease  lanes.Lease
	x      *upstream.Exchange
	cancel upstream.Cancel
	err    error
	answer string
	class  messages.FailureClass
	reason string
}

// fusion asks the panel (the model's targets for this API) in parallel,
// without streaming and without tools; members refused by their cap, or
// beyond the quorum by the admission lanes, are skipped, members that fail
// are dropped. With at
// least the quorum of answers, the judge gets the caller's request plus the
// answers and its answer is returned, streamed if the caller asked.
func (c *call) fusion() bool {
	g := c.g
	fm := c.rc.fusion[c.model.Index]
	panel := c.model.TargetsFor(c.surface)
	base := bytebufferpool.Get()
	defer bytebufferpool.Put(base)
	var err error
	if base.B, err = jsonscan.AppendWithout(base.B[:0], c.body.B, fusion.PanelDrop); err != nil {
		c.fail(apierror.InvalidJSON(err.Error()))
		return false
	}
	var bscan jsonscan.Request
	if err := jsonscan.ScanRequest(base.B, &bscan); err != nil {
		c.fail(apierror.InvalidJSON(err.Error()))
		return false
	}
	quorum := fm.Quorum(len(panel))
	members, ok := c.admitPanel(panel, quorum)
	if !ok {
		return false
	}
	h := &c.ctx.Response.Header

	mb := bytebufferpool.Get()
	for _, m := range members {
		m.x = upstream.AcquireExchange()
		c.buildRequest(m.x, m.t)
		model := m.t.UpstreamModel
		if model == "" {
			model = string(bscan.Model)
		}
		mb.B = jsonscan.AppendWithModel(mb.B[:0], base.B, &bscan, model)
		// Each member's body fits its model (transport/attempt); a panel
		// member's changes are not reported (the judge's answer is).
		m.x.Req.SetBody(c.att.FitMember(mb.B, c.TargetInfo(m.t)))
		m.x.Req.Header.Set(fasthttp.HeaderAccept, "application/json")
	}
	bytebufferpool.Put(mb)
	if !c.cancel.Notify(func() {
		for _, m := range members {
			m.cancel.Cancel()
		}
	}) {
		for _, m := range members {
			m.cancel.Cancel()
		}
	}
	var wg sync.WaitGroup
	c.att.Start = g.clk.Now()
	for _, m := range members {
		wg.Add(1)
		go func(m *panelMember) {
			defer wg.Done()
			m.err = g.client(m.t.Conn.ID).Do(m.x, &m.cancel, false)
		}(m)
	}
	wg.Wait()
	c.cancel.Notify(nil)

	var answered, failed []*panelMember
	for _, m := range members {
		c.settleMember(m)
		o, drop := admit.OutcomeOf(m.class, m.reason)
		g.adm.ReleaseLease(&m.lease, o, drop)
		m.x.Release()
		if m.class == messages.OK {
			answered = append(answered, m)
		} else {
			failed = append(failed, m)
		}
	}
	if c.cancel.Cancelled() {
		c.ctx.SetConnectionClose()
		c.ctx.SetStatusCode(499)
		return false
	}
	h.Set("X-OmniRoute-Fusion-Panel", "answered="+strconv.Itoa(len(answered))+"; failed="+strconv.Itoa(len(failed))+
		"; skipped="+strconv.Itoa(c.lane.Skips)+"; quorum="+strconv.Itoa(quorum))
	if len(answered) > 0 {
		h.Set("X-OmniRoute-Fusion-Answered", memberNames(answered))
	}
	if len(failed) > 0 {
		h.Set("X-OmniRoute-Fusion-Failed", memberNames(failed))
	}
	if len(answered) < quorum {
		c.routingHeaders()
		c.fail(apierror.New(apierror.CodeFusionQuorumNotMet,
			len(answered), len(panel), c.model.Name, len(failed), c.lane.Skips, quorum).Retry(1))
		return false
	}

	answers := make([]string, len(answered))
	for i, m := range answered {
		answers[i] = m.answer
	}
	judge, judgeScan := c.att.Judge()
	if judge.B, err = fusion.JudgeBody(judge.B[:0], c.surface, c.body.B, fusion.JudgePrompt(fm.Prompt, answers)); err != nil {
		c.fail(apierror.New(apierror.CodeInvalidRequest, err.Error()))
		return false
	}
	if err := jsonscan.ScanRequest(judge.B, judgeScan); err != nil {
		c.fail(apierror.InvalidJSON(err.Error()))
		return false
	}
	g.logFusion(c, answered, failed, quorum)
	switch {
	case fm.JudgeModel != nil:
		list := fm.JudgeModel.TargetsFor(c.surface)
		if len(list) == 0 {
			c.fail(errWrongSurface(fm.JudgeModel, c.surface))
			return false
		}
		return c.runTargets(list, fm.JudgeModel.WeightsFor(c.surface), false)
	case fm.JudgeTarget != nil:
		return c.runTargets([]*catalog.Target{fm.JudgeTarget}, oneWeight, false)
	}
	return c.runTargets([]*catalog.Target{answered[0].t}, oneWeight, false)
}

// admitPanel takes the fusion panel's members their upstreams' capacity.
// Each member is first tried where there is room now. When fewer than the
// quorum have room, the request gives back what it took and waits, in its
// lanes, for the quorum's members one after another in upstream order,
// then tries the rest: every request waits only while holding upstreams
// that come earlier in that order, so two fusions never wait on each
// other. Members beyond the quorum that find no room are skipped (the
// redundant work an overloaded gateway sheds first).
func (c *call) admitPanel(panel []*catalog.Target, quorum int) ([]*panelMember, bool) {
	g := c.g
	c.plan.Input, _ = g.plan.Estimate(c.body.B, &c.scan)
	all := make([]*panelMember, len(panel))
	admitted := 0
	for i, t := range panel {
		all[i] = &panelMember{t: t}
		if c.tryAdmit(t, &all[i].lease) {
			admitted++
		}
	}
	if admitted < quorum {
		for _, m := range all {
			g.adm.ReleaseLease(&m.lease, lanes.LocalReject, false)
		}
		order := append([]*panelMember(nil), all...)
		sort.SliceStable(order, func(i, j int) bool { return order[i].t.ID < order[j].t.ID })
		admitted = 0
		refusal, retry := lanes.Unavailable, 0
		for _, m := range order {
			if admitted >= quorum {
				if c.tryAdmit(m.t, &m.lease) {
					admitted++
				}
				continue
			}
			switch r := c.admit(m.t, &m.lease); r {
			case lanes.None:
				admitted++
			case lanes.Aborted:
				c.releasePanel(all)
				c.failAdmission(r, 0)
				return nil, false
			default:
				refusal, retry = r, m.lease.RetryAfter
			}
		}
		if admitted < quorum {
			c.releasePanel(all)
			c.failAdmission(refusal, retry)
			return nil, false
		}
	}
	members := make([]*panelMember, 0, admitted)
	for _, m := range all {
		if m.lease.Held() {
			members = append(members, m)
		} else {
			c.lane.NoteSkip(&c.g.adm, m.t)
		}
	}
	return members, true
}

func (c *call) releasePanel(ms []*panelMember) {
	for _, m := range ms {
		c.g.adm.ReleaseLease(&m.lease, lanes.LocalReject, false)
	}
}

// oneWeight is the weight list of a single-candidate run.
var oneWeight = []int{1}

// settleMember classifies a panel member's answer, reports the attempt and
// extracts its text.
func (c *call) settleMember(m *panelMember) {
	if m.err != nil {
		m.class = attempt.Classify(m.err)
		c.report(m.t, m.class, 0, 0)
		return
	}
	status := m.x.Resp.StatusCode()
	if status < 200 || status >= 300 {
		v := failure.Analyze(status, m.x.Resp.Body())
		m.class, m.reason = v.Class, v.Reason
		c.report(m.t, m.class, status, m.x.TTFB)
		return
	}
	text, ok := fusion.Answer(c.surface, m.x.Resp.Body())
	if !ok {
		m.class = messages.Protocol
		c.report(m.t, m.class, status, m.x.TTFB)
		return
	}
	m.class, m.answer = messages.OK, text
	c.report(m.t, messages.OK, status, m.x.TTFB)
}

func memberNames(ms []*panelMember) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.t.Name
	}
	return strings.Join(names, ", ")
}

func (g *Gateway) logFusion(c *call, answered, failed []*panelMember, quorum int) {
	g.log.Debug("fusion panel", "model", c.model.Name, "answered", memberNames(answered), "failed", memberNames(failed),
		"skipped", c.lane.Skips, "quorum", quorum, "requestId", string(c.rid))
}
