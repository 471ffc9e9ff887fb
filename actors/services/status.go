package services

import "time"

// State is a service's lifecycle state (the reference's vocabulary).
type State string

// The states. A crashed service waiting for its restart, and one the
// supervisor gave up on, are both in Error; Status.NextRestartAt and
// Status.GaveUp tell them apart.
const (
	NotInstalled State = "not_installed"
	Stopped      State = "stopped"
	Starting     State = "starting"
	Running      State = "running"
	Stopping     State = "stopping"
	Error        State = "error"
)

// AllStates lists the states in a stable order (metrics).
var AllStates = [...]State{NotInstalled, Stopped, Starting, Running, Stopping, Error}

// Health is the result of the health checks, orthogonal to State.
type Health string

// The health values.
const (
	Healthy   Health = "healthy"
	Unhealthy Health = "unhealthy"
	Unknown   Health = "unknown"
)

// AllHealth lists the health values in a stable order (metrics).
var AllHealth = [...]Health{Healthy, Unhealthy, Unknown}

// Exit describes how a spawned process ended.
type Exit struct {
	// Code is the exit status, nil when killed by a signal.
	Code   *int      `json:"code"`
	Signal string    `json:"signal,omitempty"`
	Error  string    `json:"error,omitempty"`
	At     time.Time `json:"at"`
	RanMs  int64     `json:"ranMs"`
}

// Status is one service's published, immutable view.
type Status struct {
	Tool      string     `json:"tool"`
	State     State      `json:"state"`
	Health    Health     `json:"health"`
	PID       *int       `json:"pid"`
	Port      int        `json:"port"`
	StartedAt *time.Time `json:"startedAt"`
	LastError *string    `json:"lastError"`
	// Adopted is always false: the gateway adopts no process it did not
	// start (a look-alike on the port is a conflict). It is kept because
	// the reference's status has it.
	Adopted   bool   `json:"adopted"`
	Instance  string `json:"instance,omitempty"`
	Installed bool   `json:"installed"`
	AutoStart bool   `json:"autoStart"`
	// Restarts counts automatic restarts since the gateway started.
	Restarts uint64 `json:"restarts"`
	// Crashes counts crashes inside the current crash window.
	Crashes            int        `json:"crashes"`
	ConsecutiveCrashes int        `json:"consecutiveCrashes"`
	NextRestartAt      *time.Time `json:"nextRestartAt"`
	BackoffMs          int64      `json:"backoffMs,omitempty"`
	// GaveUp: too many crashes in the window; only an explicit start (or
	// restart) tries again.
	GaveUp         bool       `json:"gaveUp"`
	HealthFailures int        `json:"healthFailures"`
	LastHealthAt   *time.Time `json:"lastHealthAt,omitempty"`
	LastExit       *Exit      `json:"lastExit,omitempty"`
}

// Usable reports whether traffic may be sent to the service: running and
// not failing its health checks.
func (s *Status) Usable() bool { return s.State == Running && s.Health != Unhealthy }
