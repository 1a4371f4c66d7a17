// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_probe_test: after "modprobe vrnic" and vrnic-up, the device is
 * probed, registered with ib_core and the netdev, usable from libibverbs
 * through the vrnic provider.
 *
 * Usage: vrnic_probe_test <ipv4 address of the vrnic netdev>
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include "vrnic_hw.h"
#include "vrnic_test_util.h"

/*
 * The test registers (scratch, an interrupt on every vector, a test DMA)
 * through ethtool's self-test, on the running function (review 2, S9:
 * no longer at every probe).
 */
static void test_ethtool_self_test(void)
{
	char *out = NULL;
	int rc;

	rc = vt_run(&out, 1, "ethtool -t $(ls /sys/bus/pci/drivers/vrnic/*/net"
			     " | head -1) online 2>&1");
	ksft_test_result(rc == 0 && out &&
			 strstr(out, "The test result is PASS") &&
			 strstr(out, "test DMA"),
			 "ethtool -t: scratch, interrupts, test DMA pass\n");
	free(out);
}

/*
 * The function with the PCI ID of include/vrnic_hw.h (what lspci -n -d
 * shows) is there once, with the spec's class and revision, and vrnic
 * holds it (virtio_pci, which matches every 1af4 device, let it go).
 */
static void test_pci_identity(void)
{
	unsigned int class = 0, rev = 0;
	char *out = NULL, drv[64] = "";
	int rc, n = 0;

	rc = vt_run(&out, 1,
		    "for d in /sys/bus/pci/devices/*; do "
		    "[ \"$(cat $d/vendor) $(cat $d/device)\" = "
		    "\"0x%04x 0x%04x\" ] || continue; "
		    "echo $(cat $d/class) $(cat $d/revision) "
		    "$(basename \"$(readlink $d/driver)\"); done",
		    VRNIC_PCI_VENDOR_ID, VRNIC_PCI_DEVICE_ID);
	/* Exactly one such function: one line of output. */
	if (rc == 0 && *out && strchr(out, '\n') == out + strlen(out) - 1)
		n = sscanf(out, "%x %x %63s", &class, &rev, drv);
	ksft_test_result(n == 3 && class == VRNIC_PCI_CLASS << 8 &&
			 rev == VRNIC_PCI_REVISION && !strcmp(drv, "vrnic"),
			 "PCI function %04x:%04x, class %06x, revision %02x, driver vrnic\n",
			 VRNIC_PCI_VENDOR_ID, VRNIC_PCI_DEVICE_ID,
			 VRNIC_PCI_CLASS << 8, VRNIC_PCI_REVISION);
	free(out);
}

static void test_rdma_link(void)
{
	char *out = NULL;
	int rc = vt_run(&out, 1, "rdma link show vrnic0/1 2>&1");

	ksft_test_result(rc == 0 && strstr(out, "link vrnic0/1 state ACTIVE") &&
			 strstr(out, "physical_state LINK_UP") &&
			 strstr(out, " netdev "),
			 "rdma link: vrnic0/1 ACTIVE with a netdev\n");
	free(out);
}

static void test_gid_table(const char *ip)
{
	char want[64], path[128];
	struct in_addr a;
	int i, found = 0;

	if (inet_pton(AF_INET, ip, &a) != 1) {
		ksft_test_result_fail("GID table: bad address %s\n", ip);
		return;
	}
	snprintf(want, sizeof(want),
		 "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x",
		 ((unsigned char *)&a)[0], ((unsigned char *)&a)[1],
		 ((unsigned char *)&a)[2], ((unsigned char *)&a)[3]);
	for (i = 0; i < 16 && !found; i++) {
		char *gid, *type;

		snprintf(path, sizeof(path),
			 "/sys/class/infiniband/vrnic0/ports/1/gids/%d", i);
		gid = vt_read_file(path);
		snprintf(path, sizeof(path),
			 "/sys/class/infiniband/vrnic0/ports/1/gid_attrs/types/%d",
			 i);
		type = vt_read_file(path);
		if (gid && type && !strncmp(gid, want, strlen(want)) &&
		    strstr(type, "RoCE v2"))
			found = 1;
		free(gid);
		free(type);
	}
	ksft_test_result(found, "GID table holds RoCE v2 GID %s (::ffff:%s)\n",
			 want, ip);
}

static void test_ibv_devinfo(void)
{
	char *out = NULL;
	int rc = vt_run(&out, 0, "ibv_devinfo -v -d vrnic0 2>&1");

	ksft_test_result(rc == 0 && strstr(out, "hca_id:\tvrnic0") &&
			 strstr(out, "PORT_ACTIVE") &&
			 strstr(out, "link_layer:\t\tEthernet") &&
			 !strstr(out, "no userspace device-specific driver"),
			 "ibv_devinfo -v loads the vrnic provider\n");
	if (rc || !strstr(out, "hca_id:\tvrnic0"))
		ksft_print_msg("%s\n", out);
	free(out);
}

static void test_verbs_context(void)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_device_attr dattr = {};
	struct ibv_port_attr pattr;
	struct ibv_context *ctx;
	int i, n, ok, id_ok = 0, lim_ok = 0, cq_ok = 0, cq_err = 0;
	struct ibv_cq *cq = NULL;
	struct ibv_wc wc;
	char *maps;
	struct ibv_pd *pd;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "vrnic0"))
			dev = list[i];
	if (!dev) {
		ksft_test_result_fail("libibverbs lists vrnic0\n");
		ksft_test_result_skip("user context maps its doorbell page: no device\n");
		ksft_test_result_skip("ibv_query_device: vendor and part ID: no device\n");
		ksft_test_result_skip("ibv_query_device: SRQ and multicast limits: no device\n");
		ksft_test_result_skip("a CQ of max_cqe entries: no device\n");
		if (list)
			ibv_free_device_list(list);
		return;
	}
	ksft_test_result_pass("libibverbs lists vrnic0\n");

	ctx = ibv_open_device(dev);
	ok = ctx != NULL;
	if (ctx) {
		pd = ibv_alloc_pd(ctx);
		ok = ok && pd;
		ok = ok && !ibv_query_port(ctx, 1, &pattr) &&
		     pattr.state == IBV_PORT_ACTIVE &&
		     pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
		/* The provider mapped the doorbell page through uverbs. */
		maps = vt_read_file("/proc/self/maps");
		ok = ok && maps && strstr(maps, "/dev/infiniband/uverbs");
		free(maps);
		if (pd)
			ibv_dealloc_pd(pd);
		/* The PCI ID, as the driver reports it through ib_core. */
		id_ok = !ibv_query_device(ctx, &dattr) &&
			dattr.vendor_id == VRNIC_PCI_VENDOR_ID &&
			dattr.vendor_part_id == VRNIC_PCI_DEVICE_ID;
		/* The limits QUERY_DEVICE gives (review 2, S11). */
		lim_ok = id_ok && dattr.max_srq == VRNIC_MAX_SRQ - 1 &&
			 dattr.max_srq_wr == dattr.max_qp_wr &&
			 dattr.max_srq_sge == dattr.max_sge &&
			 dattr.max_mcast_grp == VRNIC_MAX_MCAST_ATTACH &&
			 dattr.max_mcast_qp_attach == VRNIC_MAX_MCAST_ATTACH &&
			 dattr.max_total_mcast_qp_attach ==
			 VRNIC_MAX_MCAST_ATTACH;
		/*
		 * Issue 29: max_cqe is 2^22, as mlx5's (libfabric's
		 * verbs;ofi_rxm asks for 262144 entries), a CQ that deep is
		 * made (a 128 MiB ring) and polls empty, one entry more is
		 * EINVAL.
		 */
		if (id_ok && dattr.max_cqe == 1 << VRNIC_MAX_CQ_LOG_DEPTH)
			cq = ibv_create_cq(ctx, dattr.max_cqe, NULL, NULL, 0);
		if (cq) {
			cq_ok = cq->cqe >= dattr.max_cqe &&
				ibv_poll_cq(cq, 1, &wc) == 0;
			cq_ok = !ibv_destroy_cq(cq) && cq_ok;
			errno = 0;
			cq = ibv_create_cq(ctx, dattr.max_cqe + 1, NULL, NULL, 0);
			cq_err = errno;
			if (cq) {
				ibv_destroy_cq(cq);
				cq_ok = 0;
			}
			cq_ok = cq_ok && cq_err == EINVAL;
		}
		ibv_close_device(ctx);
	}
	ksft_test_result(ok, "user context maps its doorbell page, PD, port ACTIVE\n");
	ksft_test_result(id_ok, "ibv_query_device: vendor_id 0x%x, vendor_part_id 0x%x\n",
			 VRNIC_PCI_VENDOR_ID, VRNIC_PCI_DEVICE_ID);
	ksft_test_result(lim_ok,
			 "ibv_query_device: max_srq %d, max_mcast_grp %d, SRQ WR/SGE as the QP's\n",
			 dattr.max_srq, dattr.max_mcast_grp);
	ksft_test_result(cq_ok,
			 "a CQ of max_cqe %d entries polls empty, one more is EINVAL (%d)\n",
			 dattr.max_cqe, cq_err);
	ibv_free_device_list(list);
}

/*
 * RoCE counters in rdma statistic, the function's in ethtool -S, each in
 * one place (review 2, S6: rdma statistic repeated ethtool's).
 */
static void test_hw_counters(void)
{
	char *out = NULL, *eth = NULL;
	int rc = vt_run(&out, 1, "rdma statistic show link vrnic0/1 2>&1");
	int erc = vt_run(&eth, 1, "ethtool -S $(vrnic-netdev) 2>&1");

	ksft_test_result(rc == 0 && strstr(out, "sent_pkts") &&
			 strstr(out, "ack_timeouts") &&
			 strstr(out, "roce_rx_frames") &&
			 !strstr(out, "admin_cmds") &&
			 !strstr(out, "db_violations") &&
			 !strstr(out, "eth_tx_frames"),
			 "rdma statistic shows the RoCE counters, not the function's\n");
	ksft_test_result(erc == 0 && strstr(eth, "dev_admin_cmds") &&
			 strstr(eth, "dev_db_violations"),
			 "ethtool -S shows the function's counters\n");
	free(out);
	free(eth);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		ksft_exit_fail_msg("usage: %s <vrnic ipv4 address>\n", argv[0]);
	ksft_print_header();
	ksft_set_plan(12);
	test_ethtool_self_test();
	test_pci_identity();
	test_rdma_link();
	test_gid_table(argv[1]);
	test_ibv_devinfo();
	test_verbs_context();
	test_hw_counters();
	ksft_finished();
}
