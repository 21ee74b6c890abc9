/*
 * clock.c - the two clocks outboxd reads, in microseconds.
 *
 * The monotonic clock measures durations (timeouts, leases, backoff,
 * rate limits): a step of the wall clock (NTP, an operator) must not make
 * them longer or shorter.  The wall clock is for instants that are stored
 * or shown (sent_at, a fulfillment's time, a random seed).
 */
#include "config.h"

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include "outboxd.h"

int64_t
clock_mono_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
clock_wall_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timeval
clock_tv(long ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	return tv;
}
