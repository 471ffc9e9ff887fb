package admission

import (
	"testing"
	"time"
)

func takeIf(free *int64) func(int64) Decision {
	return func(cost int64) Decision {
		if cost <= *free {
			*free -= cost
			return Take
		}
		return Skip
	}
}

func TestSchedulerServesSmallestVirtualStartFirst(t *testing.T) {
	s := NewScheduler(0)
	for id := LaneID(1); id <= 3; id++ {
		s.AddLane(id, 1)
	}
	free := int64(100)
	// Lane 1 is served three times in a row; then lanes 2 and 3 arrive.
	for i := uint64(1); i <= 3; i++ {
		s.SetHead(1, Interactive, i, 10, 0)
		if id, _, _, _, ok := s.Next(Interactive, 0, takeIf(&free)); !ok || id != 1 {
			t.Fatalf("round %d: %v %v", i, id, ok)
		}
	}
	s.SetHead(1, Interactive, 4, 10, 0)
	s.SetHead(2, Interactive, 5, 10, 0)
	s.SetHead(3, Interactive, 6, 10, 0)
	var order []LaneID
	for i := 0; i < 3; i++ {
		id, _, _, _, ok := s.Next(Interactive, 0, takeIf(&free))
		if !ok {
			t.Fatal("nothing taken")
		}
		order = append(order, id)
	}
	if order[2] != 1 {
		t.Fatalf("the lane served three times went before the newcomers: %v", order)
	}
}

func TestSchedulerHistoryDecays(t *testing.T) {
	s := NewScheduler(int64(time.Second))
	s.AddLane(1, 1)
	s.AddLane(2, 1)
	free := int64(1 << 40)
	for i := uint64(1); i <= 50; i++ {
		s.SetHead(1, Interactive, i, 10, 0)
		s.Next(Interactive, 0, takeIf(&free))
	}
	// Ten half-lives later lane 1's lead of 490 has decayed below one request.
	now := int64(10 * time.Second)
	s.SetHead(1, Interactive, 100, 10, now)
	s.SetHead(2, Interactive, 101, 10, now)
	id, _, _, _, _ := s.Next(Interactive, now, takeIf(&free))
	id2, _, _, _, _ := s.Next(Interactive, now, takeIf(&free))
	if id == 2 && id2 == 1 {
		return // equal footing again (ties go by arrival: lane 1 first is also fine)
	}
	if id != 1 {
		t.Fatalf("decayed history still penalises lane 1: served %v then %v", id, id2)
	}
}

func TestSchedulerAgingReservesABypassedHead(t *testing.T) {
	s := NewScheduler(0)
	s.AddLane(1, 1)
	s.AddLane(2, 1)
	s.SetHead(1, Interactive, 1, 50, 0) // big, first
	free := int64(10)
	for i := uint64(0); i < ReservePasses; i++ {
		s.SetHead(2, Interactive, 10+i, 5, 0)
		id, _, _, _, ok := s.Next(Interactive, 0, takeIf(&free))
		if !ok || id != 2 {
			t.Fatalf("small work should pass the big head while it is young (%d): %v %v", i, id, ok)
		}
		free = 10
	}
	s.SetHead(2, Interactive, 20, 5, 0)
	if _, _, _, _, ok := s.Next(Interactive, 0, takeIf(&free)); ok {
		t.Fatal("a head bypassed twice must hold its class until it fits")
	}
	free = 50
	if id, _, _, _, ok := s.Next(Interactive, 0, takeIf(&free)); !ok || id != 1 {
		t.Fatalf("reserved head not served when it fits: %v %v", id, ok)
	}
	// Polling without capacity ages nothing.
	s.SetHead(1, Interactive, 30, 50, 0)
	free = 0
	for i := 0; i < 5; i++ {
		s.Next(Interactive, 0, takeIf(&free))
	}
	free = 10
	if id, _, _, _, ok := s.Next(Interactive, 0, takeIf(&free)); !ok || id != 2 {
		t.Fatalf("polling with no capacity aged the big head: %v %v", id, ok)
	}
}

func TestSchedulerDropAndRemove(t *testing.T) {
	s := NewScheduler(0)
	s.AddLane(1, 1)
	s.SetHead(1, Batch, 1, 500, 0)
	_, seq, _, d, ok := s.Next(Batch, 0, func(int64) Decision { return Drop })
	if !ok || d != Drop || seq != 1 || s.Heads(Batch) != 0 {
		t.Fatalf("drop: %v %v %v", seq, d, ok)
	}
	s.SetHead(1, Batch, 2, 5, 0)
	s.RemoveLane(1)
	if s.Heads(Batch) != 0 || s.Lanes() != 0 {
		t.Fatal("RemoveLane left a head behind")
	}
	if _, _, _, _, ok := s.Next(Batch, 0, func(int64) Decision { return Take }); ok {
		t.Fatal("removed lane served")
	}
}
