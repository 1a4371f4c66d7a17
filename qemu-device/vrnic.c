/*
 * vrnic: QOM/PCI glue of the vrnic RDMA NIC model.
 *
 * This file follows the e1000e split: it owns the PCI function (BARs,
 * MSI-X, reset), the network backend and the QEMU services (bottom half,
 * timer, tracing, logging) and forwards everything else to the C++20
 * engine behind qemu-device/engine/vrnic_engine.h.
 *
 * Specification: Documentation/vrnic-spec.rst in the vrnic tree.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "migration/vmstate.h"
#include "net/net.h"
#include "system/dma.h"
#include "trace.h"

#include "vrnic_hw.h"
#include "engine/vrnic_engine.h"

#define TYPE_VRNIC "vrnic"
OBJECT_DECLARE_SIMPLE_TYPE(VrnicState, VRNIC)

struct VrnicState {
    PCIDevice parent_obj;

    MemoryRegion regs;
    MemoryRegion doorbells;
    NICState *nic;
    NICConf conf;
    QEMUBH *bh;
    QEMUBH *timer_bh;
    QEMUBH *tx_bh;              /* the network took the frames it held */
    QEMUBH *ctl_bh;             /* link changes and x-fault-internal */
    bool link_up;               /* the link state ctl_bh gives the engine */
    bool link_changed;
    bool internal_fault;        /* x-fault-internal was set */
    QEMUTimer *timer;
    struct vrnic_engine *engine;
    uint64_t host_mem_budget;   /* property host-mem-budget, bytes */
    uint32_t speed_mbps;        /* property speed-mbps */
    /* Test-only fault injection (spec: "Fault injection"). */
    uint32_t fault_admin;       /* x-fault-admin: 0, delay in ms, or NEVER */
    bool aq_db_held;            /* an AQ doorbell write is held back */
    uint32_t aq_db_val;         /* the last one held */
    QEMUTimer *fault_timer;     /* releases it after the delay */
    QEMUBH *fault_bh;
    uint32_t fault_destroy;     /* x-fault-destroy: refuse the next N */
    uint32_t fault_create_ring; /* x-fault-create-ring: refuse the next N */
    uint64_t aq_base;           /* the engine's AQ, for x-fault-destroy */
    uint32_t aq_log_depth;
};

#define VRNIC_FAULT_ADMIN_NEVER UINT32_MAX
/* A reserved admin flag: the engine answers BAD_PARAM (x-fault-destroy). */
#define VRNIC_FAULT_CMD_FLAG 0x80

/* ---------------------------------------------------- platform layer --- */

static bool vrnic_dma_hits_own_bars(VrnicState *s, uint64_t addr, size_t len)
{
    static const int bars[] = { VRNIC_REG_BAR, VRNIC_DB_BAR, VRNIC_MSIX_BAR };
    PCIDevice *pdev = PCI_DEVICE(s);

    for (size_t i = 0; i < ARRAY_SIZE(bars); i++) {
        pcibus_t base = pci_get_bar_addr(pdev, bars[i]);
        pcibus_t size = pdev->io_regions[bars[i]].size;

        if (base == PCI_BAR_UNMAPPED || !size) {
            continue;
        }
        if (addr < base + size && base < addr + len) {
            return true;
        }
    }
    return false;
}

static int vrnic_dma_check(VrnicState *s, uint64_t addr, size_t len,
                           bool is_write)
{
    if (len == 0 || addr + len < addr) {
        qemu_log_mask(LOG_GUEST_ERROR, "vrnic: DMA range 0x%" PRIx64
                      "+0x%zx wraps\n", addr, len);
        trace_vrnic_dma_error(addr, len, is_write);
        return -1;
    }
    if (vrnic_dma_hits_own_bars(s, addr, len)) {
        qemu_log_mask(LOG_GUEST_ERROR, "vrnic: DMA to own BAR refused at 0x%"
                      PRIx64 "\n", addr);
        trace_vrnic_dma_error(addr, len, is_write);
        return -1;
    }
    return 0;
}

static void vrnic_fault_destroy_cmd(VrnicState *s, uint64_t addr,
                                    void *buf, size_t len);

static int vrnic_plat_dma_read(void *opaque, uint64_t addr, void *buf,
                               size_t len)
{
    VrnicState *s = opaque;

    if (vrnic_dma_check(s, addr, len, false) ||
        pci_dma_read(PCI_DEVICE(s), addr, buf, len) != MEMTX_OK) {
        trace_vrnic_dma_error(addr, len, false);
        return -1;
    }
    if (s->fault_destroy || s->fault_create_ring) {
        vrnic_fault_destroy_cmd(s, addr, buf, len);
    }
    return 0;
}

static int vrnic_plat_dma_write(void *opaque, uint64_t addr, const void *buf,
                                size_t len)
{
    VrnicState *s = opaque;

    if (vrnic_dma_check(s, addr, len, true) ||
        pci_dma_write(PCI_DEVICE(s), addr, buf, len) != MEMTX_OK) {
        trace_vrnic_dma_error(addr, len, true);
        return -1;
    }
    return 0;
}

/*
 * The network queued the frames it could not take yet (its peer's socket
 * was full) and has now sent them: the engine may hand over more.  Never
 * enter the engine from here, a BH does.
 */
static void vrnic_frame_sent(NetClientState *nc, ssize_t len)
{
    VrnicState *s = qemu_get_nic_opaque(nc);

    qemu_bh_schedule(s->tx_bh);
}

static void vrnic_tx_bh(void *opaque)
{
    VrnicState *s = opaque;

    if (s->engine) {
        vrnic_engine_tx_resume(s->engine);
    }
}

/*
 * With a sent callback the network queues a frame it cannot deliver
 * (returns 0) instead of dropping it once its queue is long: the engine
 * then stops until vrnic_frame_sent(), and its bounded outbox holds the
 * rest (back-pressure instead of loss on a busy wire).
 */
static int vrnic_plat_send_frame(void *opaque, const void *frame, size_t len)
{
    VrnicState *s = opaque;

    return qemu_send_packet_async(qemu_get_queue(s->nic), frame, len,
                                  vrnic_frame_sent) == 0;
}

static void vrnic_plat_raise_irq(void *opaque, unsigned int vector)
{
    PCIDevice *pdev = PCI_DEVICE(opaque);

    if (msix_enabled(pdev) && vector < VRNIC_NUM_MSIX) {
        msix_notify(pdev, vector);
    }
}

static void vrnic_plat_schedule(void *opaque)
{
    VrnicState *s = opaque;

    qemu_bh_schedule(s->bh);
}

static void vrnic_plat_rx_ready(void *opaque)
{
    VrnicState *s = opaque;

    qemu_flush_queued_packets(qemu_get_queue(s->nic));
}

static uint64_t vrnic_plat_now_ns(void *opaque)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

static void vrnic_plat_timer_arm(void *opaque, uint64_t deadline_ns)
{
    VrnicState *s = opaque;

    timer_mod(s->timer, deadline_ns);
}

static void vrnic_plat_guest_error(void *opaque, const char *msg)
{
    qemu_log_mask(LOG_GUEST_ERROR, "%s\n", msg);
    trace_vrnic_guest_error(msg);
}

static void vrnic_plat_trace(void *opaque, enum vrnic_trace_id id,
                             uint64_t a, uint64_t b, uint64_t c)
{
    switch (id) {
    case VRNIC_TRACE_REG_READ:
        trace_vrnic_reg_read(a, b);
        break;
    case VRNIC_TRACE_REG_WRITE:
        trace_vrnic_reg_write(a, b);
        break;
    case VRNIC_TRACE_DB_WRITE:
        trace_vrnic_db_write(a, b, c);
        break;
    case VRNIC_TRACE_ADMIN_CMD:
        trace_vrnic_admin_cmd(a, b, c);
        break;
    case VRNIC_TRACE_ADMIN_DONE:
        trace_vrnic_admin_done(a, b, c);
        break;
    case VRNIC_TRACE_EQ_POST:
        trace_vrnic_eq_post(a, b, c);
        break;
    case VRNIC_TRACE_EQ_OVERFLOW:
        trace_vrnic_eq_overflow(a, b);
        break;
    case VRNIC_TRACE_IRQ:
        trace_vrnic_irq(a);
        break;
    case VRNIC_TRACE_ETH_TX:
        trace_vrnic_eth_tx(a, b);
        break;
    case VRNIC_TRACE_ETH_RX:
        trace_vrnic_eth_rx(a, b);
        break;
    case VRNIC_TRACE_ETH_RX_DROP:
        trace_vrnic_eth_rx_drop(a, b);
        break;
    case VRNIC_TRACE_ROCE_RX:
        trace_vrnic_roce_rx(a);
        break;
    case VRNIC_TRACE_RESET:
        trace_vrnic_reset();
        break;
    case VRNIC_TRACE_LINK:
        trace_vrnic_link(a);
        break;
    case VRNIC_TRACE_FATAL:
        trace_vrnic_fatal(a);
        break;
    case VRNIC_TRACE_MAC_CONTROL:
        trace_vrnic_mac_control(a, b);
        break;
    case VRNIC_TRACE_NUM:
        break;
    }
}

static const struct vrnic_platform_ops vrnic_platform = {
    .dma_read = vrnic_plat_dma_read,
    .dma_write = vrnic_plat_dma_write,
    .send_frame = vrnic_plat_send_frame,
    .raise_irq = vrnic_plat_raise_irq,
    .schedule = vrnic_plat_schedule,
    .rx_ready = vrnic_plat_rx_ready,
    .now_ns = vrnic_plat_now_ns,
    .timer_arm = vrnic_plat_timer_arm,
    .guest_error = vrnic_plat_guest_error,
    .trace = vrnic_plat_trace,
};

/* ------------------------------------------------- fault injection --- */

/*
 * x-fault-admin holds back the admin queue doorbell in the glue, so the
 * engine sees the commands late (a delay in ms) or never (UINT32_MAX).
 * The doorbell is a producer index: the last value held stands for every
 * command rung since.  A device reset (REG_CTRL or the PCI reset) drops
 * it, as a real device forgets a queue it has not fetched yet.
 */
static void vrnic_fault_release(VrnicState *s)
{
    if (!s->aq_db_held) {
        return;
    }
    s->aq_db_held = false;
    trace_vrnic_fault_admin_release(s->aq_db_val);
    vrnic_engine_reg_write(s->engine, VRNIC_REG_AQ_DB, s->aq_db_val, 4);
}

static void vrnic_fault_bh(void *opaque)
{
    vrnic_fault_release(opaque);
}

static void vrnic_fault_timer_cb(void *opaque)
{
    VrnicState *s = opaque;

    qemu_bh_schedule(s->fault_bh);
}

static void vrnic_fault_clear(VrnicState *s)
{
    timer_del(s->fault_timer);
    qemu_bh_cancel(s->fault_bh);
    s->aq_db_held = false;
}

/* True if the write was taken by an active x-fault-admin. */
static bool vrnic_fault_admin_db(VrnicState *s, uint64_t val, unsigned size)
{
    if (!s->fault_admin || size != 4) {
        return false;
    }
    s->aq_db_held = true;
    s->aq_db_val = val;
    trace_vrnic_fault_admin_hold(val, s->fault_admin);
    if (s->fault_admin != VRNIC_FAULT_ADMIN_NEVER &&
        !timer_pending(s->fault_timer)) {
        timer_mod(s->fault_timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                  (int64_t)s->fault_admin * SCALE_MS);
    }
    return true;
}

static void vrnic_get_fault_admin(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    VrnicState *s = VRNIC(obj);

    visit_type_uint32(v, name, &s->fault_admin, errp);
}

/*
 * x-fault-internal: setting it true makes the engine fail internally
 * once, as an engine bug would (vrnic_engine_inject_internal_error): the
 * device goes FATAL and posts the FATAL event.  Reading gives false.
 */
static bool vrnic_get_fault_internal(Object *obj, Error **errp)
{
    return false;
}

static void vrnic_set_fault_internal(Object *obj, bool value, Error **errp)
{
    VrnicState *s = VRNIC(obj);

    if (!value) {
        return;
    }
    /* -device vrnic,x-fault-internal=on sets it before realize. */
    if (!s->engine) {
        error_setg(errp, "vrnic: x-fault-internal needs a realized device");
        return;
    }
    trace_vrnic_fault_internal();
    s->internal_fault = true;
    qemu_bh_schedule(s->ctl_bh);
}

/* Settable at run time (qom-set); 0 lets a held doorbell through now. */
static void vrnic_set_fault_admin(Object *obj, Visitor *v, const char *name,
                                  void *opaque, Error **errp)
{
    VrnicState *s = VRNIC(obj);
    uint32_t val;

    if (!visit_type_uint32(v, name, &val, errp)) {
        return;
    }
    s->fault_admin = val;
    if (!s->aq_db_held || !s->fault_timer) {
        return;
    }
    timer_del(s->fault_timer);
    if (!val) {
        qemu_bh_schedule(s->fault_bh);
    } else if (val != VRNIC_FAULT_ADMIN_NEVER) {
        timer_mod(s->fault_timer, qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) +
                  (int64_t)val * SCALE_MS);
    }
}

/*
 * x-fault-destroy = N: the next N DESTROY_EQ, _ETH_RING, _MR, _CQ, _QP or
 * _SRQ admin commands (the objects that point the device at host memory)
 * the engine fetches are refused: the glue sets a reserved flag bit in the
 * engine's copy of the command (never in guest memory), so the engine
 * answers BAD_PARAM and keeps the object, as a device that refuses to let
 * go of it.  Not reset by a device reset: it counts commands.
 * x-fault-create-ring = N does the same to the next N CREATE_ETH_RING, as a
 * device out of resources for a ring: the driver's MTU change must then
 * keep (or restore) a working interface.
 */
static void vrnic_fault_destroy_cmd(VrnicState *s, uint64_t addr,
                                    void *buf, size_t len)
{
    struct vrnic_admin_cmd *cmd = buf;
    uint64_t base = s->aq_base, off = addr - s->aq_base;
    uint32_t log = s->aq_log_depth;

    if (len != sizeof(*cmd)) {
        return;
    }
    if (addr < base || log > 16 || off >= (uint64_t)sizeof(*cmd) << log ||
        off % sizeof(*cmd)) {
        return;
    }
    switch (cmd->opcode) {
    case VRNIC_ADMIN_DESTROY_EQ:
    case VRNIC_ADMIN_DESTROY_ETH_RING:
    case VRNIC_ADMIN_DESTROY_MR:
    case VRNIC_ADMIN_DESTROY_CQ:
    case VRNIC_ADMIN_DESTROY_QP:
    case VRNIC_ADMIN_DESTROY_SRQ:
        if (!s->fault_destroy) {
            return;
        }
        s->fault_destroy--;
        cmd->flags |= VRNIC_FAULT_CMD_FLAG;
        trace_vrnic_fault_destroy(cmd->opcode, le32_to_cpu(cmd->destroy.id),
                                  s->fault_destroy);
        break;
    case VRNIC_ADMIN_CREATE_ETH_RING:
        if (!s->fault_create_ring) {
            return;
        }
        s->fault_create_ring--;
        cmd->flags |= VRNIC_FAULT_CMD_FLAG;
        trace_vrnic_fault_create_ring(cmd->create_eth_ring.type,
                                      s->fault_create_ring);
        break;
    default:
        return;
    }
}

/* x-fault-destroy, x-fault-create-ring: opaque is the field's offset. */
static void vrnic_access_fault_count(Object *obj, Visitor *v,
                                     const char *name, void *opaque,
                                     Error **errp)
{
    VrnicState *s = VRNIC(obj);

    visit_type_uint32(v, name, (uint32_t *)((char *)s + (uintptr_t)opaque),
                      errp);
}

/*
 * The engine refuses calls from inside its own callbacks (a DMA read is
 * one), so vrnic_fault_destroy_cmd() uses the AQ registers as the engine
 * last accepted them, read back after every write and reset.
 */
static void vrnic_aq_regs_update(VrnicState *s)
{
    s->aq_base = vrnic_engine_reg_read(s->engine, VRNIC_REG_AQ_BASE_LO, 4) |
                 vrnic_engine_reg_read(s->engine, VRNIC_REG_AQ_BASE_HI, 4) <<
                 32;
    s->aq_log_depth = vrnic_engine_reg_read(s->engine,
                                            VRNIC_REG_AQ_LOG_DEPTH, 4);
}

/* ------------------------------------------------------------ BARs --- */

static uint64_t vrnic_regs_read(void *opaque, hwaddr addr, unsigned size)
{
    VrnicState *s = opaque;

    return vrnic_engine_reg_read(s->engine, addr, size);
}

static void vrnic_regs_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    VrnicState *s = opaque;

    if (addr == VRNIC_REG_AQ_DB && vrnic_fault_admin_db(s, val, size)) {
        return;
    }
    if (addr == VRNIC_REG_CTRL && size == 4 && (val & VRNIC_CTRL_RESET)) {
        vrnic_fault_clear(s);
    }
    if (addr == VRNIC_REG_CTRL && size == 4 &&
        ((val & VRNIC_CTRL_RESET) || !(val & VRNIC_CTRL_ENABLE))) {
        /*
         * Reset, or disable (which resets the engine too): frames queued
         * before it never leave after it, the network's included.
         */
        qemu_purge_queued_packets(qemu_get_queue(s->nic));
    }
    vrnic_engine_reg_write(s->engine, addr, val, size);
    switch (addr) {
    case VRNIC_REG_CTRL:
    case VRNIC_REG_AQ_BASE_LO:
    case VRNIC_REG_AQ_BASE_HI:
    case VRNIC_REG_AQ_LOG_DEPTH:
        vrnic_aq_regs_update(s);
        break;
    }
}

static const MemoryRegionOps vrnic_regs_ops = {
    .read = vrnic_regs_read,
    .write = vrnic_regs_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    /* The engine sees the access size and refuses anything but 32 bits. */
    .valid = { .min_access_size = 1, .max_access_size = 8 },
    .impl = { .min_access_size = 1, .max_access_size = 8 },
};

static uint64_t vrnic_db_read(void *opaque, hwaddr addr, unsigned size)
{
    return 0;
}

static void vrnic_db_write(void *opaque, hwaddr addr, uint64_t val,
                           unsigned size)
{
    VrnicState *s = opaque;

    vrnic_engine_db_write(s->engine, addr, val, size);
}

static const MemoryRegionOps vrnic_db_ops = {
    .read = vrnic_db_read,
    .write = vrnic_db_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 1, .max_access_size = 8 },
    .impl = { .min_access_size = 1, .max_access_size = 8 },
};

/* ----------------------------------------------------- net backend --- */

static bool vrnic_can_receive(NetClientState *nc)
{
    VrnicState *s = qemu_get_nic_opaque(nc);

    return vrnic_engine_can_receive(s->engine);
}

static ssize_t vrnic_receive(NetClientState *nc, const uint8_t *buf,
                             size_t size)
{
    VrnicState *s = qemu_get_nic_opaque(nc);

    return vrnic_engine_receive(s->engine, buf, size);
}

/*
 * QMP set_link and x-fault-internal reach the engine from a bottom half,
 * under the device's reentrancy guard like every other main-loop entry.
 */
static void vrnic_set_link_status(NetClientState *nc)
{
    VrnicState *s = qemu_get_nic_opaque(nc);

    s->link_up = !nc->link_down;
    s->link_changed = true;
    qemu_bh_schedule(s->ctl_bh);
}

static void vrnic_ctl_bh(void *opaque)
{
    VrnicState *s = opaque;

    if (s->link_changed) {
        s->link_changed = false;
        vrnic_engine_set_link(s->engine, s->link_up);
    }
    if (s->internal_fault) {
        s->internal_fault = false;
        vrnic_engine_inject_internal_error(s->engine);
    }
}

static NetClientInfo net_vrnic_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .can_receive = vrnic_can_receive,
    .receive = vrnic_receive,
    .link_status_changed = vrnic_set_link_status,
};

/* ------------------------------------------------------- lifecycle --- */

static void vrnic_bh(void *opaque)
{
    VrnicState *s = opaque;

    vrnic_engine_poll(s->engine);
}

/*
 * The timer only schedules a bottom half: the engine's timer work then runs
 * under the device's reentrancy guard, like every other entry from the
 * main loop, so an interrupt it raises cannot reach the device's own BARs.
 */
static void vrnic_timer_bh(void *opaque)
{
    VrnicState *s = opaque;

    vrnic_engine_timer(s->engine);
}

static void vrnic_timer_cb(void *opaque)
{
    VrnicState *s = opaque;

    qemu_bh_schedule(s->timer_bh);
}

static void vrnic_realize(PCIDevice *pdev, Error **errp)
{
    VrnicState *s = VRNIC(pdev);
    DeviceState *dev = DEVICE(pdev);
    struct vrnic_engine_config cfg = { .num_msix = VRNIC_NUM_MSIX };
    int ret;

    if (s->host_mem_budget < VRNIC_HOST_MEM_BUDGET_MIN ||
        s->host_mem_budget > VRNIC_HOST_MEM_BUDGET_MAX) {
        error_setg(errp, "vrnic: host-mem-budget must be between 16M and 1T");
        return;
    }
    cfg.host_mem_budget = s->host_mem_budget;
    if (s->speed_mbps < 1 || s->speed_mbps > VRNIC_SPEED_MBPS_MAX) {
        error_setg(errp, "vrnic: speed-mbps must be between 1 and %u",
                   VRNIC_SPEED_MBPS_MAX);
        return;
    }
    cfg.speed_mbps = s->speed_mbps;
    pci_config_set_interrupt_pin(pdev->config, 1);

    memory_region_init_io(&s->regs, OBJECT(s), &vrnic_regs_ops, s,
                          "vrnic-regs", VRNIC_REG_BAR_SIZE);
    pci_register_bar(pdev, VRNIC_REG_BAR,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64, &s->regs);
    memory_region_init_io(&s->doorbells, OBJECT(s), &vrnic_db_ops, s,
                          "vrnic-doorbells", VRNIC_DB_BAR_SIZE);
    pci_register_bar(pdev, VRNIC_DB_BAR,
                     PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64, &s->doorbells);

    ret = msix_init_exclusive_bar(pdev, VRNIC_NUM_MSIX, VRNIC_MSIX_BAR, errp);
    if (ret) {
        return;
    }
    for (unsigned i = 0; i < VRNIC_NUM_MSIX; i++) {
        msix_vector_use(pdev, i);
    }

    qemu_macaddr_default_if_unset(&s->conf.macaddr);
    memcpy(cfg.mac, s->conf.macaddr.a, sizeof(cfg.mac));
    s->nic = qemu_new_nic(&net_vrnic_info, &s->conf,
                          object_get_typename(OBJECT(s)), dev->id,
                          &dev->mem_reentrancy_guard, s);
    qemu_format_nic_info_str(qemu_get_queue(s->nic), s->conf.macaddr.a);
    cfg.link_up = !qemu_get_queue(s->nic)->link_down;

    s->bh = qemu_bh_new_guarded(vrnic_bh, s, &dev->mem_reentrancy_guard);
    s->timer_bh = qemu_bh_new_guarded(vrnic_timer_bh, s,
                                      &dev->mem_reentrancy_guard);
    s->timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, vrnic_timer_cb, s);
    s->tx_bh = qemu_bh_new_guarded(vrnic_tx_bh, s, &dev->mem_reentrancy_guard);
    s->ctl_bh = qemu_bh_new_guarded(vrnic_ctl_bh, s, &dev->mem_reentrancy_guard);
    s->fault_bh = qemu_bh_new_guarded(vrnic_fault_bh, s,
                                      &dev->mem_reentrancy_guard);
    s->fault_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, vrnic_fault_timer_cb, s);
    s->engine = vrnic_engine_new(&cfg, &vrnic_platform, s);
    if (!s->engine) {
        error_setg(errp, "vrnic: cannot allocate the device engine");
        qemu_del_nic(s->nic);
        qemu_bh_delete(s->tx_bh);
        qemu_bh_delete(s->ctl_bh);
        qemu_bh_delete(s->bh);
        qemu_bh_delete(s->timer_bh);
        timer_free(s->timer);
        qemu_bh_delete(s->fault_bh);
        timer_free(s->fault_timer);
        s->fault_timer = NULL;
        msix_uninit_exclusive_bar(pdev);
        return;
    }
}

static void vrnic_exit(PCIDevice *pdev)
{
    VrnicState *s = VRNIC(pdev);

    /*
     * First: a frame of ours still queued at the peer would call
     * vrnic_frame_sent() on a freed device; purging calls it now.
     */
    qemu_purge_queued_packets(qemu_get_queue(s->nic));
    qemu_del_nic(s->nic);
    qemu_bh_delete(s->tx_bh);
    qemu_bh_delete(s->ctl_bh);
    vrnic_engine_free(s->engine);
    s->engine = NULL;
    timer_free(s->timer);
    qemu_bh_delete(s->timer_bh);
    qemu_bh_delete(s->bh);
    timer_free(s->fault_timer);
    s->fault_timer = NULL;
    qemu_bh_delete(s->fault_bh);
    msix_uninit_exclusive_bar(pdev);
}

static void vrnic_reset_hold(Object *obj, ResetType type)
{
    VrnicState *s = VRNIC(obj);

    timer_del(s->timer);
    qemu_bh_cancel(s->timer_bh);
    qemu_bh_cancel(s->bh);
    /* A pending x-fault-internal does not outlive the reset; a link
     * change still applies (the link did change). */
    s->internal_fault = false;
    vrnic_fault_clear(s);
    qemu_purge_queued_packets(qemu_get_queue(s->nic));
    vrnic_engine_reset(s->engine);
    vrnic_aq_regs_update(s);
    msix_reset(PCI_DEVICE(s));
    msix_unuse_all_vectors(PCI_DEVICE(s));
    for (unsigned i = 0; i < VRNIC_NUM_MSIX; i++) {
        msix_vector_use(PCI_DEVICE(s), i);
    }
}

/*
 * The engine keeps queue state that is not described to the migration
 * stream yet, so the device blocks migration rather than lose it.
 */
static const VMStateDescription vmstate_vrnic = {
    .name = "vrnic",
    .unmigratable = 1,
};

static const Property vrnic_properties[] = {
    DEFINE_NIC_PROPERTIES(VrnicState, conf),
    /* Host memory the guest may make the device hold (spec: Resource
     * limits). */
    DEFINE_PROP_SIZE("host-mem-budget", VrnicState, host_mem_budget,
                     VRNIC_HOST_MEM_BUDGET_DEFAULT),
    /* The port speed: QUERY_PORT, ethtool, and PFC pause timing. */
    DEFINE_PROP_UINT32("speed-mbps", VrnicState, speed_mbps,
                       VRNIC_SPEED_MBPS_DEFAULT),
};

static void vrnic_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);
    ResettableClass *rc = RESETTABLE_CLASS(klass);

    k->realize = vrnic_realize;
    k->exit = vrnic_exit;
    k->vendor_id = VRNIC_PCI_VENDOR_ID;
    k->device_id = VRNIC_PCI_DEVICE_ID;
    k->revision = VRNIC_PCI_REVISION;
    k->class_id = VRNIC_PCI_CLASS;
    rc->phases.hold = vrnic_reset_hold;
    dc->desc = "vrnic RoCEv2 RDMA NIC";
    dc->vmsd = &vmstate_vrnic;
    device_class_set_props(dc, vrnic_properties);
    /* Not a qdev property: those cannot change once realized. */
    object_class_property_add(klass, "x-fault-admin", "uint32",
                              vrnic_get_fault_admin, vrnic_set_fault_admin,
                              NULL, NULL);
    object_class_property_set_description(klass, "x-fault-admin",
        "test only: hold admin doorbells back N ms, 0 off, 4294967295 never");
    object_class_property_add(klass, "x-fault-destroy", "uint32",
                              vrnic_access_fault_count,
                              vrnic_access_fault_count, NULL,
                              (void *)offsetof(VrnicState, fault_destroy));
    object_class_property_set_description(klass, "x-fault-destroy",
        "test only: refuse the next N DESTROY admin commands");
    object_class_property_add(klass, "x-fault-create-ring", "uint32",
                              vrnic_access_fault_count,
                              vrnic_access_fault_count, NULL,
                              (void *)offsetof(VrnicState, fault_create_ring));
    object_class_property_set_description(klass, "x-fault-create-ring",
        "test only: refuse the next N CREATE_ETH_RING admin commands");
    object_class_property_add_bool(klass, "x-fault-internal",
                                   vrnic_get_fault_internal,
                                   vrnic_set_fault_internal);
    object_class_property_set_description(klass, "x-fault-internal",
        "test only: set true to make the device fail internally (FATAL)");
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
}

static const TypeInfo vrnic_info = {
    .name = TYPE_VRNIC,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(VrnicState),
    .class_init = vrnic_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { },
    },
};

static void vrnic_register_types(void)
{
    type_register_static(&vrnic_info);
}

type_init(vrnic_register_types)
