package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU is where the processor time of a workload went, to tell a workload
// bound by CPU from one that waits on round trips or fsync.
type CPU struct {
	// ProcessCores is this process's CPU time (the client, the probe and the
	// in-process runner) over the wall time: 1.0 is one core busy.
	ProcessCores float64 `json:"process_cores"`
	// PostgresCores is the CPU time of the Postgres server processes that
	// serve this run's connections (this process's, the workers' and the
	// probe's), over the wall time; zero on SQLite or when Postgres runs
	// elsewhere.
	PostgresCores float64 `json:"postgres_cores,omitempty"`
	// WorkerCores is the CPU time of the worker processes over the wall
	// time, when the run has any.
	WorkerCores float64 `json:"worker_cores,omitempty"`
	// OtherCores is the busy share of the machine that none of the above
	// accounts for: Postgres' own processes (WAL writer, checkpointer…) and
	// whatever else runs on the machine. Much of it means the figures were
	// disturbed.
	OtherCores float64 `json:"other_cores,omitempty"`
	// MachineBusyPercent is the share of all the machine's cores that were
	// busy (Postgres, workers and everything else included), from /proc/stat.
	MachineBusyPercent float64 `json:"machine_busy_percent,omitempty"`
	// MachineIOWaitPercent is the share of the cores idle while I/O (fsync)
	// was outstanding.
	MachineIOWaitPercent float64 `json:"machine_iowait_percent,omitempty"`
	// MachineStealPercent is the share of the cores' time the hypervisor
	// gave to other virtual machines while this one wanted to run (steal in
	// /proc/stat): cores the run could not use, and a sign that its figures
	// are lower than an unshared machine's.
	MachineStealPercent float64 `json:"machine_steal_percent,omitempty"`
}

// cpuSample is a reading of the CPU counters.
type cpuSample struct {
	at      time.Time
	process time.Duration
	// Machine jiffies: total, busy, iowait and steal; zero without
	// /proc/stat.
	total, busy, iowait, steal uint64
}

func readCPU() cpuSample {
	s := cpuSample{at: time.Now(), process: processCPU()}
	s.total, s.busy, s.iowait, s.steal = readProcStat()
	return s
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procCPU reads a process's user and system time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcPidStat(string(b))
}

// parseProcPidStat reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line; the command name in parentheses may hold spaces.
func parseProcPidStat(line string) (time.Duration, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(line[i+1:])
	// fields[0] is field 3 (state), so utime and stime are fields[11], [12].
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// readProcStat reads the machine's CPU jiffies from /proc/stat.
func readProcStat() (total, busy, iowait, steal uint64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, 0, 0
	}
	return parseProcStatCPU(sc.Text())
}

// parseProcStatCPU parses the "cpu" line of /proc/stat: user nice system
// idle iowait irq softirq steal (guest time is already in user). Busy is
// what this machine's processes and kernel used: neither idle, iowait nor
// steal.
func parseProcStatCPU(line string) (total, busy, iowait, steal uint64) {
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, 0, 0
	}
	var v []uint64
	for _, f := range fields[1:min(len(fields), 9)] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, 0, 0
		}
		v = append(v, n)
	}
	for _, n := range v {
		total += n
	}
	if len(v) > 7 {
		steal = v[7]
	}
	return total, total - v[3] - v[4] - steal, v[4], steal
}

// cpuSince describes the CPU use between a sample and now; pgStart and
// pgEnd are the CPU times of the run's Postgres backends, when known.
func cpuSince(start cpuSample, pgStart, pgEnd time.Duration, pgKnown bool) CPU {
	end := readCPU()
	c := CPU{}
	if wall := end.at.Sub(start.at); wall > 0 {
		c.ProcessCores = float64(end.process-start.process) / float64(wall)
		if pgKnown && pgEnd >= pgStart {
			c.PostgresCores = float64(pgEnd-pgStart) / float64(wall)
		}
	}
	if total := end.total - start.total; total > 0 && end.total > start.total {
		c.MachineBusyPercent = 100 * float64(end.busy-start.busy) / float64(total)
		c.MachineIOWaitPercent = 100 * float64(end.iowait-start.iowait) / float64(total)
		c.MachineStealPercent = 100 * float64(end.steal-start.steal) / float64(total)
	}
	return c
}
