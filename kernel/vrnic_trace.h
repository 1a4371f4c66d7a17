/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic tracepoints: the control path as the driver sees it.
 *
 *   echo 1 > /sys/kernel/tracing/events/vrnic/enable
 *
 * The data path (post_send, poll_cq) has no tracepoints: user QPs never
 * enter the kernel, and the device model has trace-events for what the
 * device does with each WQE and packet.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM vrnic

#if !defined(_VRNIC_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _VRNIC_TRACE_H

#include <linux/tracepoint.h>
#include <rdma/ib_verbs.h>

#define vrnic_show_qp_state(state)				\
	__print_symbolic(state, { IB_QPS_RESET, "RESET" },	\
			 { IB_QPS_INIT, "INIT" }, { IB_QPS_RTR, "RTR" }, \
			 { IB_QPS_RTS, "RTS" }, { IB_QPS_SQD, "SQD" },	\
			 { IB_QPS_SQE, "SQE" }, { IB_QPS_ERR, "ERR" })

/* An admin command completed (or failed): opcode, device status, time. */
TRACE_EVENT(vrnic_admin_cmd,
	    TP_PROTO(const char *dev, u8 opcode, u16 token, u8 status,
		     u32 result, s64 usecs),
	    TP_ARGS(dev, opcode, token, status, result, usecs),
	    TP_STRUCT__entry(__string(dev, dev)
			     __field(u8, opcode)
			     __field(u16, token)
			     __field(u8, status)
			     __field(u32, result)
			     __field(s64, usecs)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->opcode = opcode;
			   __entry->token = token;
			   __entry->status = status;
			   __entry->result = result;
			   __entry->usecs = usecs;),
	    TP_printk("%s: opcode=0x%02x token=%u status=%u result=0x%x usecs=%lld",
		      __get_str(dev), __entry->opcode, __entry->token,
		      __entry->status, __entry->result, __entry->usecs)
);

/* The device reported an asynchronous event on the AEQ. */
TRACE_EVENT(vrnic_async_event,
	    TP_PROTO(const char *dev, u8 type, u32 id),
	    TP_ARGS(dev, type, id),
	    TP_STRUCT__entry(__string(dev, dev)
			     __field(u8, type)
			     __field(u32, id)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->type = type;
			   __entry->id = id;),
	    TP_printk("%s: type=0x%02x id=%u", __get_str(dev),
		      __entry->type, __entry->id)
);

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

#endif /* _VRNIC_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE vrnic_trace
#include <trace/define_trace.h>
