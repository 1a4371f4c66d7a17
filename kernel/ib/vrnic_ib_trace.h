/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic_ib tracepoints: QP state transitions.  They share the "vrnic"
 * system with the function driver's (core/vrnic_trace.h):
 *
 *   echo 1 > /sys/kernel/tracing/events/vrnic/enable
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM vrnic

#if !defined(_VRNIC_IB_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _VRNIC_IB_TRACE_H

#include <linux/tracepoint.h>
#include <rdma/ib_verbs.h>

#define vrnic_show_qp_state(state)				\
	__print_symbolic(state, { IB_QPS_RESET, "RESET" },	\
			 { IB_QPS_INIT, "INIT" }, { IB_QPS_RTR, "RTR" }, \
			 { IB_QPS_RTS, "RTS" }, { IB_QPS_SQD, "SQD" },	\
			 { IB_QPS_SQE, "SQE" }, { IB_QPS_ERR, "ERR" })

/* A QP state transition was requested; ret is the outcome. */
TRACE_EVENT(vrnic_modify_qp,
	    TP_PROTO(const char *dev, u32 qpn, int cur, int next, u32 vmask,
		     int ret),
	    TP_ARGS(dev, qpn, cur, next, vmask, ret),
	    TP_STRUCT__entry(__string(dev, dev)
			     __field(u32, qpn)
			     __field(int, cur)
			     __field(int, next)
			     __field(u32, vmask)
			     __field(int, ret)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->qpn = qpn;
			   __entry->cur = cur;
			   __entry->next = next;
			   __entry->vmask = vmask;
			   __entry->ret = ret;),
	    TP_printk("%s: qpn=%u %s -> %s attr_mask=0x%x ret=%d",
		      __get_str(dev), __entry->qpn,
		      vrnic_show_qp_state(__entry->cur),
		      vrnic_show_qp_state(__entry->next),
		      __entry->vmask, __entry->ret)
);

#endif /* _VRNIC_IB_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE vrnic_ib_trace
#include <trace/define_trace.h>
