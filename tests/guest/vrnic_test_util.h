/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the vrnic guest selftests (TAP via kselftest.h).
 */
#ifndef VRNIC_TEST_UTIL_H
#define VRNIC_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kselftest.h"

#define VT_OUT_MAX (256 * 1024)

/* Run a shell command; returns its exit status and its output in *out
 * (malloc'ed, NUL-terminated; caller frees).  Output lines go to the TAP
 * stream as diagnostics when verbose is set.
 */
static inline int vt_run(char **out, int verbose, const char *fmt, ...)
{
	char cmd[1024], *buf;
	size_t len = 0, n;
	va_list ap;
	FILE *p;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	buf = calloc(1, VT_OUT_MAX + 1);
	if (!buf)
		ksft_exit_fail_msg("out of memory\n");
	p = popen(cmd, "r");
	if (!p)
		ksft_exit_fail_msg("popen %s: %s\n", cmd, strerror(errno));
	while (len < VT_OUT_MAX &&
	       (n = fread(buf + len, 1, VT_OUT_MAX - len, p)) > 0)
		len += n;
	st = pclose(p);
	if (verbose) {
		char *copy = strdup(buf), *save = NULL, *line;

		ksft_print_msg("$ %s\n", cmd);
		for (line = copy ? strtok_r(copy, "\n", &save) : NULL; line;
		     line = strtok_r(NULL, "\n", &save))
			ksft_print_msg("  %s\n", line);
		free(copy);
	}
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline char *vt_read_file(const char *path)
{
	char *buf = calloc(1, VT_OUT_MAX + 1);
	ssize_t len = 0, n;
	int fd;

	if (!buf)
		return NULL;
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	while (len < VT_OUT_MAX &&
	       (n = read(fd, buf + len, VT_OUT_MAX - len)) > 0)
		len += n;
	close(fd);
	return buf;
}

/* Whole kernel log via /dev/kmsg, message text only, one per line. */
static inline char *vt_dmesg(void)
{
	char *buf = calloc(1, 4 * VT_OUT_MAX + 1), rec[8192];
	size_t len = 0;
	ssize_t n;
	int fd;

	if (!buf)
		return NULL;
	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	while ((n = read(fd, rec, sizeof(rec) - 1)) > 0 || errno == EPIPE) {
		char *msg;

		if (n <= 0)
			continue;	/* EPIPE: overwritten record, go on */
		rec[n] = 0;
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		n = strcspn(msg, "\n");
		if (len + n + 2 >= 4 * VT_OUT_MAX)
			break;
		memcpy(buf + len, msg, n);
		len += n;
		buf[len++] = '\n';
	}
	close(fd);
	return buf;
}

static inline double vt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif /* VRNIC_TEST_UTIL_H */
