/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic tracepoints of the function driver: admin commands, async events.
 * vrnic_ib.ko adds its own (vrnic_ib_trace.h) to the same system.
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

#endif /* _VRNIC_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE vrnic_trace
#include <trace/define_trace.h>
