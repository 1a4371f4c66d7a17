// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic provider: the memory the device reads and writes, rings and
 * doorbell records, page-aligned and kept out of fork()ed children.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ccan/list.h>
#include <util/bitmap.h>
#include <util/util.h>

#include <infiniband/driver.h>

#include "vrnic.h"

#define VRNIC_PAGE	4096

/* NULL with errno set on failure, as every allocation here. */
void *vrnic_alloc_queue(size_t size)
{
	void *p;
	int ret;

	size = align(size, VRNIC_PAGE);
	ret = posix_memalign(&p, VRNIC_PAGE, size);
	if (ret) {
		errno = ret;	/* posix_memalign does not set errno */
		return NULL;
	}
	memset(p, 0, size);
	/*
	 * ibv_dontfork_range() returns -1, not an errno: the errno is
	 * madvise()'s, or malloc()'s in libibverbs' range tree.
	 */
	errno = 0;
	if (ibv_dontfork_range(p, size)) {
		ret = errno > 0 ? errno : ENOMEM;
		free(p);
		errno = ret;
		return NULL;
	}
	return p;
}

void vrnic_free_queue(void *p, size_t size)
{
	if (!p)
		return;
	ibv_dofork_range(p, align(size, VRNIC_PAGE));
	free(p);
}

/*
 * Doorbell records come from a per-context pool of pages, 512 records of
 * 8 bytes each (review C.10: a page per record pinned thousands of pages
 * for thousands of QPs).  The kernel pins each page once per context and
 * counts its users.  A page goes back when its last record is freed,
 * which is after the kernel destroyed the last object using it.  Pages
 * of objects never destroyed stay allocated, like their rings: the device
 * may write them until the context is closed, and then they go
 * (vrnic_dbrec_pool_free()).
 */
#define VRNIC_DBREC_SIZE	8
#define VRNIC_DBRECS		(VRNIC_PAGE / VRNIC_DBREC_SIZE)

static_assert(sizeof(struct vrnic_qp_dbrec) <= VRNIC_DBREC_SIZE, "dbrec");
static_assert(sizeof(struct vrnic_cq_dbrec) <= VRNIC_DBREC_SIZE, "dbrec");
static_assert(sizeof(struct vrnic_srq_dbrec) <= VRNIC_DBREC_SIZE, "dbrec");

struct vrnic_dbrec_page {
	struct list_node entry;		/* in ctx->dbrec_pages */
	uint8_t *page;
	unsigned int used;
	unsigned long free[BITS_TO_LONGS(VRNIC_DBRECS)];	/* set: free */
};

/* A zeroed 8-byte doorbell record; NULL with errno set. */
void *vrnic_dbrec_alloc(struct vrnic_context *ctx)
{
	struct vrnic_dbrec_page *p;
	unsigned long n;
	uint8_t *rec;
	bool found = false;

	pthread_mutex_lock(&ctx->dbrec_mutex);
	list_for_each(&ctx->dbrec_pages, p, entry) {
		if (p->used < VRNIC_DBRECS) {
			found = true;
			break;
		}
	}
	if (!found) {
		p = calloc(1, sizeof(*p));
		if (!p)
			goto err;
		p->page = vrnic_alloc_queue(VRNIC_PAGE);
		if (!p->page) {
			int err = errno;

			free(p);
			errno = err;
			goto err;
		}
		bitmap_fill(p->free, VRNIC_DBRECS);
		list_add(&ctx->dbrec_pages, &p->entry);
	}
	n = bitmap_find_first_bit(p->free, 0, VRNIC_DBRECS);
	bitmap_clear_bit(p->free, n);
	p->used++;
	rec = p->page + n * VRNIC_DBREC_SIZE;
	memset(rec, 0, VRNIC_DBREC_SIZE);
	pthread_mutex_unlock(&ctx->dbrec_mutex);
	return rec;
err:
	pthread_mutex_unlock(&ctx->dbrec_mutex);
	return NULL;
}

void vrnic_dbrec_free(struct vrnic_context *ctx, void *rec)
{
	struct vrnic_dbrec_page *p;

	if (!rec)
		return;
	pthread_mutex_lock(&ctx->dbrec_mutex);
	list_for_each(&ctx->dbrec_pages, p, entry) {
		if ((uint8_t *)rec < p->page ||
		    (uint8_t *)rec >= p->page + VRNIC_PAGE)
			continue;
		bitmap_set_bit(p->free,
			       ((uint8_t *)rec - p->page) / VRNIC_DBREC_SIZE);
		if (!--p->used) {
			list_del(&p->entry);
			vrnic_free_queue(p->page, VRNIC_PAGE);
			free(p);
		}
		break;
	}
	pthread_mutex_unlock(&ctx->dbrec_mutex);
}

/*
 * Context close: the pages still holding records of objects the application
 * never destroyed.  Only once the command file is closed (the kernel has
 * destroyed those objects with the context, so the device writes no more).
 */
void vrnic_dbrec_pool_free(struct vrnic_context *ctx)
{
	struct vrnic_dbrec_page *p, *next;

	list_for_each_safe(&ctx->dbrec_pages, p, next, entry) {
		list_del(&p->entry);
		vrnic_free_queue(p->page, VRNIC_PAGE);
		free(p);
	}
}
