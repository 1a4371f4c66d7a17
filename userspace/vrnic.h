/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic rdma-core provider.
 */
#ifndef __VRNIC_H__
#define __VRNIC_H__

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <ccan/ilog.h>
#include <ccan/list.h>
#include <infiniband/driver.h>

#include "vrnic_hw.h"

/*
 * The QP table, QPN index -> QP: VRNIC_QP_TABLE_PAGES pages of 4096
 * pointers, each allocated when a QP of its range is first created (the
 * shape of mlx5's), so that a context with a few QPs holds a page or two
 * of the 2^20 slots.
 */
#define VRNIC_QP_TABLE_SHIFT	12
#define VRNIC_QP_TABLE_MASK	((1u << VRNIC_QP_TABLE_SHIFT) - 1)
#define VRNIC_QP_TABLE_PAGES \
	((VRNIC_OBJ_INDEX_MASK >> VRNIC_QP_TABLE_SHIFT) + 1)

struct vrnic_device {
	struct verbs_device ibv_dev;
};

struct vrnic_qp;

/*
 * Locking.  A CQ's lock covers its consumer index and everything
 * poll_cq does with a completion: the qp_table lookup and the QP's
 * sq_tail/rq_tail update happen under the lock of the CQ that holds the
 * completion.  qp_table slots are written under qp_table_mutex and read
 * under a CQ lock, with atomics.  destroy_qp clears the QP's slot first,
 * then takes the lock of its send CQ and then of its receive CQ, one at a
 * time, and purges the QP's completions (vrnic_cq_clean): once that is
 * done no poller holds or can find the QP, and it is freed.  A move to
 * RESET purges the same way, then restarts the rings under sq_lock and
 * rq_lock.  Order: qp_table_mutex, then one CQ lock; sq_lock and rq_lock
 * are never held with a CQ lock.  sq_tail/rq_tail are written by pollers
 * and read by posters: atomics (release/acquire).  A qp_table page,
 * once published, stays until the context is freed.
 */

/*
 * A spinlock that an object created for one thread only does not take
 * (IBV_CREATE_CQ_ATTR_SINGLE_THREADED), as mlx5's mlx5_spinlock: the
 * application promised that no two threads use the object at once, so the
 * lock only checks that promise, cheaply and not reliably.
 */
struct vrnic_spinlock {
	pthread_spinlock_t lock;
	bool need_lock;
	bool in_use;		/* !need_lock: held by the one thread */
};

static inline int vrnic_spinlock_init(struct vrnic_spinlock *l, bool need_lock)
{
	l->need_lock = need_lock;
	l->in_use = false;
	return pthread_spin_init(&l->lock, PTHREAD_PROCESS_PRIVATE);
}

static inline void vrnic_spinlock_destroy(struct vrnic_spinlock *l)
{
	pthread_spin_destroy(&l->lock);
}

static inline void vrnic_spin_lock(struct vrnic_spinlock *l)
{
	if (l->need_lock) {
		pthread_spin_lock(&l->lock);
		return;
	}
	if (l->in_use) {
		fprintf(stderr,
			"vrnic: a single-threaded CQ is used by two threads\n");
		abort();
	}
	l->in_use = true;
}

static inline void vrnic_spin_unlock(struct vrnic_spinlock *l)
{
	if (l->need_lock)
		pthread_spin_unlock(&l->lock);
	else
		l->in_use = false;
}

struct vrnic_context {
	struct verbs_context ibv_ctx;
	void *db_page;		/* this context's doorbell page (BAR2) */
	uint32_t db_page_size;
	pthread_mutex_t qp_table_mutex;
	pthread_mutex_t dbrec_mutex;	/* dbrec_pages */
	struct list_head dbrec_pages;	/* doorbell record pool */
	struct vrnic_qp **qp_table[VRNIC_QP_TABLE_PAGES];	/* by QPN index */
	bool has_ece;		/* the kernel takes ECE options in modify_qp */
	uint32_t ece_offer;	/* what reliable QPs offer a peer */
	bool has_transport;	/* ... and a QP's own transport (vrnicdv) */
	uint16_t max_send_window;	/* what that takes at most */
	uint8_t max_spray_paths;
};

struct vrnic_cq {
	struct verbs_cq vcq;
	struct vrnic_spinlock lock;	/* no lock if SINGLE_THREADED */
	struct vrnic_cqe *ring;
	size_t ring_size;
	uint32_t log_depth;
	uint32_t ci;
	uint32_t cqn;
	struct vrnic_context *vctx;
	struct vrnic_cq_dbrec *dbrec;	/* from the context's pool */
	struct ibv_wc cur;		/* ibv_cq_ex: the completion being read */
};

struct vrnic_srq {
	struct verbs_srq vsrq;		/* srq_num: what XRC senders name */
	pthread_spinlock_t lock;
	uint8_t *ring;
	size_t ring_size;
	uint32_t log, shift, max_sge;
	uint32_t head;
	struct vrnic_context *vctx;
	struct vrnic_srq_dbrec *dbrec;	/* pooled; ci device-written */
};

/* The UD address vector, built by the kernel at create time. */
struct vrnic_ah {
	struct ibv_ah ibv_ah;
	struct vrnic_ud_av av;
};

struct vrnic_qp {
	struct verbs_qp vqp;
	uint32_t qpn;
	uint8_t type;			/* enum vrnic_qp_type */
	uint32_t data_off;		/* SGEs/inline start: header (+ UD AV) */
	pthread_spinlock_t sq_lock;
	pthread_spinlock_t rq_lock;
	uint8_t *sq;
	uint8_t *rq;
	size_t sq_size, rq_size;
	uint32_t sq_log, rq_log, sq_shift, rq_shift;
	uint32_t sq_head, rq_head;
	atomic_uint sq_tail, rq_tail;	/* from completions */
	struct vrnic_context *vctx;	/* NULL: XRC receive QP */
	struct vrnic_qp_dbrec *dbrec;	/* from the context's pool */
	bool sig_all;
	uint32_t max_send_sge, max_recv_sge, max_inline;
	uint32_t ops;			/* 1 << VRNIC_WR_* it may post */
	/*
	 * enum ibv_qp_state as of the last successful modify_qp or
	 * query_qp: what post_send checks.  Written by the thread that
	 * modifies or queries, read by posters: atomics.  libibverbs'
	 * qp->state is libibverbs' own.
	 */
	atomic_uint state;
	/* ibv_wr_* state between wr_start and wr_complete/wr_abort */
	uint32_t wr_start_head;
	struct vrnic_send_wqe *wr_cur;
	int wr_err;
	/*
	 * ibv_set_ece: the options both ends agreed to, passed on with every
	 * modify_qp from then on (the kernel uses them at INIT to RTR).
	 */
	bool ece_set;
	uint32_t ece_options;
	/*
	 * vrnicdv_set_qp_transport: the QP's own transport, passed on with
	 * its moves to RTR (struct vrnic_modify_qp_cmd's fields).
	 */
	bool dv_transport;
	uint32_t transport_flags;
	uint16_t send_window;
	uint8_t spray_paths;
};

static inline struct vrnic_context *to_vctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct vrnic_context, ibv_ctx.context);
}

static inline struct vrnic_cq *to_vcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct vrnic_cq, vcq.cq);
}

static inline struct vrnic_srq *to_vsrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct vrnic_srq, vsrq.srq);
}

static inline struct vrnic_ah *to_vah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct vrnic_ah, ibv_ah);
}

static inline struct vrnic_qp *to_vqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct vrnic_qp, vqp.qp);
}

/* The QP of qpn's table slot, or NULL (see Locking). */
static inline struct vrnic_qp *vrnic_qp_lookup(struct vrnic_context *ctx,
					       uint32_t qpn)
{
	uint32_t idx = qpn & VRNIC_OBJ_INDEX_MASK;
	struct vrnic_qp **page;

	page = __atomic_load_n(&ctx->qp_table[idx >> VRNIC_QP_TABLE_SHIFT],
			       __ATOMIC_ACQUIRE);
	return page ? __atomic_load_n(&page[idx & VRNIC_QP_TABLE_MASK],
				      __ATOMIC_ACQUIRE) : NULL;
}

/* ceil(log2(v)); 0 for v <= 1 */
static inline uint32_t vrnic_log2(uint32_t v)
{
	return v > 1 ? ilog32(v - 1) : 0;
}

/* sq_tail/rq_tail: written by pollers, read by posters (see Locking). */
static inline uint32_t vrnic_tail(atomic_uint *tail)
{
	return atomic_load_explicit(tail, memory_order_acquire);
}

static inline void vrnic_set_tail(atomic_uint *tail, uint32_t v)
{
	atomic_store_explicit(tail, v, memory_order_release);
}

/* dbrec.c */
void *vrnic_alloc_queue(size_t size);
void vrnic_free_queue(void *p, size_t size);
void *vrnic_dbrec_alloc(struct vrnic_context *ctx);
void vrnic_dbrec_free(struct vrnic_context *ctx, void *rec);
void vrnic_dbrec_pool_free(struct vrnic_context *ctx);

/* cq.c, srq.c, qp.c: what they share */
void vrnic_qp_clean_cqs(struct vrnic_qp *qp);
void vrnic_fill_recv_wqe(uint8_t *slot, struct ibv_recv_wr *wr);
uint32_t vrnic_rq_shift(uint32_t max_sge);

/* verbs */
struct ibv_mr *vrnic_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
			    uint64_t hca_va, int access);
int vrnic_dereg_mr(struct verbs_mr *vmr);
struct ibv_mw *vrnic_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int vrnic_dealloc_mw(struct ibv_mw *mw);
int vrnic_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		  struct ibv_mw_bind *mw_bind);
struct ibv_ah *vrnic_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int vrnic_destroy_ah(struct ibv_ah *ah);
struct ibv_srq *vrnic_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr);
int vrnic_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		     int attr_mask);
int vrnic_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int vrnic_destroy_srq(struct ibv_srq *srq);
struct ibv_srq *vrnic_create_srq_ex(struct ibv_context *ctx,
				    struct ibv_srq_init_attr_ex *attr);
int vrnic_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_xrcd *vrnic_open_xrcd(struct ibv_context *ctx,
				 struct ibv_xrcd_init_attr *attr);
int vrnic_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_qp *vrnic_open_qp(struct ibv_context *ctx,
			     struct ibv_qp_open_attr *attr);
int vrnic_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);
struct ibv_cq *vrnic_create_cq(struct ibv_context *ctx, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector);
struct ibv_cq_ex *vrnic_create_cq_ex(struct ibv_context *ctx,
				     struct ibv_cq_init_attr_ex *attr);
int vrnic_destroy_cq(struct ibv_cq *cq);
int vrnic_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int vrnic_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_qp *vrnic_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr);
struct ibv_qp *vrnic_create_qp_ex(struct ibv_context *ctx,
				  struct ibv_qp_init_attr_ex *attr);
int vrnic_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		    int attr_mask);
int vrnic_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		   int attr_mask, struct ibv_qp_init_attr *init_attr);
int vrnic_set_ece(struct ibv_qp *qp, struct ibv_ece *ece);
int vrnic_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);
bool vrnic_is_dev(struct ibv_device *device);
int vrnic_destroy_qp(struct ibv_qp *qp);
int vrnic_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr);
int vrnic_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr);

#endif /* __VRNIC_H__ */
