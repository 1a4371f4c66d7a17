// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic converged Ethernet function: one TX and one RX descriptor ring,
 * driven by NAPI.  The device posts ETH_TX/ETH_RX events on completion EQ
 * 1 when a ring it was armed for makes progress; the NAPI poll reaps both
 * rings and re-arms them with its consumer indices.  RoCEv2 frames never
 * reach these rings: the device steers UDP/4791 to its RDMA engine.
 */
#include <linux/dma-mapping.h>
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/if_vlan.h>
#include <net/netdev_queues.h>
#include <net/page_pool/helpers.h>

#include "vrnic_core.h"

#define VRNIC_ETH_EQN	1
#define VRNIC_ETH_QID	0
/* Each frame takes one TX descriptor (no scatter-gather): stop the queue
 * when none is left, wake it once a quarter of the ring is free again.
 */
#define VRNIC_TX_STOP_THRS	1
#define VRNIC_TX_WAKE_THRS	(1U << (VRNIC_ETH_LOG_DEPTH - 2))
/* After an RX buffer allocation failed, try again this much later. */
#define VRNIC_REFILL_DELAY	(HZ / 10)
/* An RX page: this much headroom, the frame, then the skb_shared_info. */
#define VRNIC_RX_HEADROOM	(NET_SKB_PAD + NET_IP_ALIGN)

static struct vrnic_netdev_priv *vrnic_priv(struct net_device *ndev)
{
	return netdev_priv(ndev);
}

static u32 vrnic_ring_free(const struct vrnic_eth_ring *r)
{
	return r->depth - (u16)(r->pi - r->ci);
}

static int vrnic_ring_alloc(struct vrnic_pf *pf, struct vrnic_eth_ring *r)
{
	r->depth = 1U << VRNIC_ETH_LOG_DEPTH;
	r->pi = 0;
	r->ci = 0;
	r->desc = dma_alloc_coherent(&pf->pdev->dev,
				     r->depth * sizeof(*r->desc), &r->dma,
				     GFP_KERNEL);
	if (!r->desc)
		return -ENOMEM;
	r->bufs = kcalloc(r->depth, sizeof(*r->bufs), GFP_KERNEL);
	if (!r->bufs) {
		dma_free_coherent(&pf->pdev->dev, r->depth * sizeof(*r->desc),
				  r->desc, r->dma);
		r->desc = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Drop every buffer of a ring the device no longer owns; empty it. */
static void vrnic_ring_reset(struct vrnic_pf *pf, struct vrnic_eth_ring *r,
			     enum dma_data_direction dir)
{
	u32 i;

	for (i = 0; i < r->depth; i++) {
		struct vrnic_eth_buf *b = &r->bufs[i];

		if (b->page) {
			page_pool_put_full_page(r->pp, b->page, false);
			b->page = NULL;
		}
		if (!b->skb)
			continue;
		dma_unmap_single(&pf->pdev->dev, b->dma, b->len, dir);
		dev_kfree_skb_any(b->skb);
		b->skb = NULL;
	}
	memset(r->desc, 0, r->depth * sizeof(*r->desc));
	r->pi = 0;
	r->ci = 0;
}

static void vrnic_ring_free_bufs(struct vrnic_pf *pf,
				 struct vrnic_eth_ring *r,
				 enum dma_data_direction dir)
{
	vrnic_ring_reset(pf, r, dir);
	/* Pages still in skbs return to the pool later; it waits for them. */
	if (r->pp)
		page_pool_destroy(r->pp);
	r->pp = NULL;
	kfree(r->bufs);
	r->bufs = NULL;
	dma_free_coherent(&pf->pdev->dev, r->depth * sizeof(*r->desc),
			  r->desc, r->dma);
	r->desc = NULL;
}

static int vrnic_ring_create(struct vrnic_pf *pf, struct vrnic_eth_ring *r,
			     u8 type)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_ETH_RING };
	int ret;

	cmd.create_eth_ring.base = cpu_to_le64(r->dma);
	cmd.create_eth_ring.type = type;
	cmd.create_eth_ring.log_depth = VRNIC_ETH_LOG_DEPTH;
	cmd.create_eth_ring.qid = VRNIC_ETH_QID;
	cmd.create_eth_ring.eqn = VRNIC_ETH_EQN;
	ret = vrnic_pf_admin_exec(pf, &cmd, NULL);
	r->live = !ret;
	return ret;
}

/* A refusal makes the function dead first (vrnic_pf_destroy()). */
static void vrnic_ring_destroy(struct vrnic_pf *pf, struct vrnic_eth_ring *r,
			       u8 type)
{
	/* One the device refused to create (a failed MTU restore) is not its. */
	if (!r->live)
		return;
	r->live = false;
	vrnic_pf_destroy(pf, VRNIC_ADMIN_DESTROY_ETH_RING,
			 (u32)type << 8 | VRNIC_ETH_QID, "Ethernet ring");
}

static void vrnic_ring_arm(struct vrnic_pf *pf, u32 db, u16 ci)
{
	vrnic_db(pf, db, FIELD_PREP(VRNIC_ETH_DB_QID, VRNIC_ETH_QID) |
		 FIELD_PREP(VRNIC_ETH_DB_PI, ci));
}

/* Post one fresh RX buffer at the producer index; false if out of memory.
 * The device only looks at it once the producer index is rung.
 */
static bool vrnic_rx_post_one(struct vrnic_eth_ring *r, u32 buf_len,
			      gfp_t gfp)
{
	u32 idx = r->pi & (r->depth - 1);
	struct vrnic_eth_buf *b = &r->bufs[idx];
	struct vrnic_eth_desc *d = &r->desc[idx];
	struct page *page;
	dma_addr_t dma;

	page = page_pool_alloc_pages(r->pp, gfp | __GFP_NOWARN);
	if (!page)
		return false;
	dma = page_pool_get_dma_addr(page) + VRNIC_RX_HEADROOM;
	b->page = page;
	b->dma = dma;
	b->len = buf_len;
	d->addr = cpu_to_le64(dma);
	d->len = cpu_to_le16(buf_len);
	d->flags = 0;
	d->wb_len = 0;
	d->wb_status = 0;
	r->pi++;
	return true;
}

/* Hand the descriptors below the producer index to the device. */
static void vrnic_ring_doorbell(struct vrnic_pf *pf, u32 db, u16 pi)
{
	/* The descriptors must be visible before the device may read them. */
	dma_wmb();
	vrnic_db(pf, db, FIELD_PREP(VRNIC_ETH_DB_QID, VRNIC_ETH_QID) |
		 FIELD_PREP(VRNIC_ETH_DB_PI, pi));
}

/* Fill the free RX slots; false if an allocation failed and the ring is
 * left short, so that the caller retries later.
 */
static bool vrnic_rx_refill(struct vrnic_netdev_priv *priv)
{
	struct vrnic_eth_ring *r = &priv->rx;
	u16 old = r->pi;
	bool ok = true;

	while (vrnic_ring_free(r)) {
		ok = vrnic_rx_post_one(r, priv->rx_buf_len, GFP_ATOMIC);
		if (!ok)
			break;
	}
	if (r->pi != old)
		vrnic_ring_doorbell(priv->pf, VRNIC_DB_ETH_RX, r->pi);
	return ok;
}

static void vrnic_tx_clean(struct vrnic_netdev_priv *priv, int budget)
{
	struct net_device *ndev = priv->pf->netdev;
	struct netdev_queue *txq = netdev_get_tx_queue(ndev, 0);
	struct vrnic_eth_ring *r = &priv->tx;
	struct device *dev = &priv->pf->pdev->dev;
	unsigned int pkts = 0, bytes = 0, errors = 0;

	while (r->ci != r->pi) {
		u32 idx = r->ci & (r->depth - 1);
		struct vrnic_eth_desc *d = &r->desc[idx];
		struct vrnic_eth_buf *b = &r->bufs[idx];

		if (!(READ_ONCE(d->wb_status) & VRNIC_ETH_WB_DONE))
			break;
		dma_rmb();
		if (d->wb_status & VRNIC_ETH_WB_ERROR)
			errors++;
		dma_unmap_single(dev, b->dma, b->len, DMA_TO_DEVICE);
		pkts++;
		bytes += b->skb->len;
		napi_consume_skb(b->skb, budget);
		b->skb = NULL;
		r->ci++;
	}
	u64_stats_update_begin(&priv->tx_stats.syncp);
	u64_stats_add(&priv->tx_stats.packets, pkts);
	u64_stats_add(&priv->tx_stats.bytes, bytes);
	u64_stats_add(&priv->tx_stats.errors, errors);
	u64_stats_update_end(&priv->tx_stats.syncp);
	/* BQL completion, then wake with the barrier that pairs with the
	 * re-check in netif_txq_maybe_stop().
	 */
	netif_txq_completed_wake(txq, pkts, bytes, vrnic_ring_free(r),
				 VRNIC_TX_WAKE_THRS);
}

static int vrnic_rx_poll(struct vrnic_netdev_priv *priv, int budget)
{
	struct net_device *ndev = priv->pf->netdev;
	struct vrnic_eth_ring *r = &priv->rx;
	unsigned int bytes = 0, errors = 0;
	int done = 0;

	/* netpoll's budget 0: no RX, and no page_pool use (napi.rst). */
	if (unlikely(!budget))
		return 0;
	while (done < budget && r->ci != r->pi) {
		u32 idx = r->ci & (r->depth - 1);
		struct vrnic_eth_desc *d = &r->desc[idx];
		struct vrnic_eth_buf *b = &r->bufs[idx];
		struct page *page = b->page;
		struct sk_buff *skb;
		u32 len;

		if (!(READ_ONCE(d->wb_status) & VRNIC_ETH_WB_DONE))
			break;
		dma_rmb();
		len = le16_to_cpu(d->wb_len);
		b->page = NULL;
		r->ci++;
		done++;
		if ((d->wb_status & VRNIC_ETH_WB_ERROR) || len > b->len ||
		    len < ETH_HLEN) {
			errors++;
			page_pool_put_full_page(r->pp, page, true);
			continue;
		}
		page_pool_dma_sync_for_cpu(r->pp, page, 0, len);
		skb = napi_build_skb(page_address(page),
				     PAGE_SIZE << r->pp->p.order);
		if (!skb) {
			dev_core_stats_rx_dropped_inc(ndev);
			page_pool_put_full_page(r->pp, page, true);
			continue;
		}
		skb_mark_for_recycle(skb);
		skb_reserve(skb, VRNIC_RX_HEADROOM);
		skb_put(skb, len);
		skb->protocol = eth_type_trans(skb, ndev);
		bytes += len;
		napi_gro_receive(&priv->napi, skb);
	}
	u64_stats_update_begin(&priv->rx_stats.syncp);
	u64_stats_add(&priv->rx_stats.packets, done - errors);
	u64_stats_add(&priv->rx_stats.bytes, bytes);
	u64_stats_add(&priv->rx_stats.errors, errors);
	u64_stats_update_end(&priv->rx_stats.syncp);
	/* Out of memory: retry later from a timer rather than spin in
	 * NAPI; a ring left empty gets no RX event to retry from.
	 */
	if (!vrnic_rx_refill(priv))
		schedule_delayed_work(&priv->refill_work, VRNIC_REFILL_DELAY);
	return done;
}

/* The refill itself runs in the NAPI poll, the one writer of the ring. */
static void vrnic_refill_work(struct work_struct *work)
{
	struct vrnic_netdev_priv *priv =
		container_of(to_delayed_work(work), struct vrnic_netdev_priv,
			     refill_work);

	if (READ_ONCE(priv->rings_live))
		napi_schedule(&priv->napi);
}

static int vrnic_napi_poll(struct napi_struct *napi, int budget)
{
	struct vrnic_netdev_priv *priv =
		container_of(napi, struct vrnic_netdev_priv, napi);
	int done;

	vrnic_tx_clean(priv, budget);
	done = vrnic_rx_poll(priv, budget);
	if (done < budget && napi_complete_done(napi, done)) {
		/* Arming with our consumer index makes the device report
		 * anything that completed after we looked.
		 */
		vrnic_ring_arm(priv->pf, VRNIC_DB_ETH_TX_ARM, priv->tx.ci);
		vrnic_ring_arm(priv->pf, VRNIC_DB_ETH_RX_ARM, priv->rx.ci);
	}
	return done;
}

/* Called from the completion EQ handler. */
void vrnic_eth_event(struct vrnic_pf *pf, u8 type)
{
	struct vrnic_netdev_priv *priv;

	/* Before the netdev is registered or once it is going: no netdev. */
	if (!READ_ONCE(pf->eth_events))
		return;
	priv = vrnic_priv(pf->netdev);
	if (READ_ONCE(priv->rings_live))
		napi_schedule(&priv->napi);
}

void vrnic_eth_link_change(struct vrnic_pf *pf, bool up)
{
	/* A dead function has no link (vrnic_pf_fatal() waits for this). */
	if (up && READ_ONCE(pf->aq.dead))
		return;
	netdev_info(pf->netdev, "link %s\n", up ? "up" : "down");
	if (up)
		netif_carrier_on(pf->netdev);
	else
		netif_carrier_off(pf->netdev);
}

/*
 * The carrier as VRNIC_REG_LINK has it, read with the AEQ's vector held
 * off: a PORT_UP/DOWN raised after the read is handled after this, so the
 * newest state wins.  A dead function has no link: fatal_lock keeps a
 * FATAL's carrier off from landing between the check and the update.
 */
static void vrnic_eth_link_sync(struct vrnic_pf *pf)
{
	unsigned int irq = pci_irq_vector(pf->pdev, VRNIC_AEQ_VECTOR);
	u32 link;

	mutex_lock(&pf->fatal_lock);
	disable_irq(irq);
	link = vrnic_rd(pf, VRNIC_REG_LINK);
	/* All ones: the function is gone from the bus. */
	if (!READ_ONCE(pf->aq.dead) && link != U32_MAX &&
	    (link & VRNIC_LINK_UP))
		netif_carrier_on(pf->netdev);
	else
		netif_carrier_off(pf->netdev);
	enable_irq(irq);
	mutex_unlock(&pf->fatal_lock);
}

/*
 * The page_pool of an RX ring: pages of the order one frame of @buf_len
 * needs with its headroom and skb_shared_info (order 0 up to an MTU of
 * about 3.5 KiB), mapped for the device and synced for it on recycling.
 */
static int vrnic_rx_pool_create(struct vrnic_netdev_priv *priv,
				struct vrnic_eth_ring *r, u32 buf_len)
{
	struct device *dev = &priv->pf->pdev->dev;
	struct page_pool_params pp = {
		.order = get_order(SKB_DATA_ALIGN(VRNIC_RX_HEADROOM + buf_len) +
				   SKB_DATA_ALIGN(sizeof(struct skb_shared_info))),
		.flags = PP_FLAG_DMA_MAP | PP_FLAG_DMA_SYNC_DEV,
		.pool_size = r->depth,
		.nid = dev_to_node(dev),
		.dev = dev,
		.dma_dir = DMA_FROM_DEVICE,
		.offset = VRNIC_RX_HEADROOM,
		.max_len = buf_len,
		.netdev = priv->pf->netdev,
	};

	r->pp = page_pool_create(&pp);
	if (IS_ERR(r->pp)) {
		int ret = PTR_ERR(r->pp);

		r->pp = NULL;
		return ret;
	}
	return 0;
}

/* Allocate a TX and an RX ring in host memory, the RX ring filled with
 * buffers of @buf_len.  Nothing is shown to the device yet.
 */
static int vrnic_rings_alloc(struct vrnic_netdev_priv *priv,
			     struct vrnic_eth_ring *tx,
			     struct vrnic_eth_ring *rx, u32 buf_len)
{
	struct vrnic_pf *pf = priv->pf;
	int ret;

	ret = vrnic_ring_alloc(pf, tx);
	if (ret)
		return ret;
	ret = vrnic_ring_alloc(pf, rx);
	if (ret)
		goto err_tx;
	ret = vrnic_rx_pool_create(priv, rx, buf_len);
	if (ret)
		goto err_rx;
	while (vrnic_ring_free(rx)) {
		if (!vrnic_rx_post_one(rx, buf_len, GFP_KERNEL)) {
			ret = -ENOMEM;
			goto err_rx;
		}
	}
	return 0;

err_rx:
	vrnic_ring_free_bufs(pf, rx, DMA_FROM_DEVICE);
err_tx:
	vrnic_ring_free_bufs(pf, tx, DMA_TO_DEVICE);
	return ret;
}

static void vrnic_rings_free(struct vrnic_netdev_priv *priv,
			     struct vrnic_eth_ring *tx,
			     struct vrnic_eth_ring *rx)
{
	vrnic_ring_free_bufs(priv->pf, tx, DMA_TO_DEVICE);
	vrnic_ring_free_bufs(priv->pf, rx, DMA_FROM_DEVICE);
}

/* Give priv->tx and priv->rx to the device and start the data path.  On
 * failure the device has no ring and NAPI stays disabled.
 */
static int vrnic_rings_start(struct vrnic_netdev_priv *priv)
{
	struct vrnic_pf *pf = priv->pf;
	struct net_device *ndev = pf->netdev;
	int ret;

	ret = vrnic_ring_create(pf, &priv->tx, VRNIC_ETH_RING_TX);
	if (ret)
		return ret;
	ret = vrnic_ring_create(pf, &priv->rx, VRNIC_ETH_RING_RX);
	if (ret) {
		vrnic_ring_destroy(pf, &priv->tx, VRNIC_ETH_RING_TX);
		return ret;
	}
	netdev_tx_reset_queue(netdev_get_tx_queue(ndev, 0));
	napi_enable(&priv->napi);
	/* For the netdev netlink family: the queue pair's NAPI. */
	netif_queue_set_napi(ndev, VRNIC_ETH_QID, NETDEV_QUEUE_TYPE_RX,
			     &priv->napi);
	netif_queue_set_napi(ndev, VRNIC_ETH_QID, NETDEV_QUEUE_TYPE_TX,
			     &priv->napi);
	WRITE_ONCE(priv->rings_live, true);
	vrnic_ring_doorbell(pf, VRNIC_DB_ETH_RX, priv->rx.pi);
	vrnic_ring_arm(pf, VRNIC_DB_ETH_TX_ARM, priv->tx.ci);
	vrnic_ring_arm(pf, VRNIC_DB_ETH_RX_ARM, priv->rx.ci);
	/* A short RX ring gets no event: let NAPI retry the refill. */
	if (vrnic_ring_free(&priv->rx))
		napi_schedule(&priv->napi);
	vrnic_eth_link_sync(pf);
	netif_wake_queue(ndev);
	return 0;
}

/* Stop the data path and take the rings back from the device; the host
 * memory stays allocated.
 */
static void vrnic_rings_stop(struct vrnic_netdev_priv *priv)
{
	struct vrnic_pf *pf = priv->pf;

	/* NAPI first: a running poll wakes the queue when it reaps TX
	 * descriptors, and under ndo_change_mtu the qdisc is live, so a
	 * wake after netif_tx_disable() would let start_xmit post to the
	 * rings while they are swapped and freed.
	 */
	WRITE_ONCE(priv->rings_live, false);
	netif_queue_set_napi(pf->netdev, VRNIC_ETH_QID, NETDEV_QUEUE_TYPE_RX,
			     NULL);
	netif_queue_set_napi(pf->netdev, VRNIC_ETH_QID, NETDEV_QUEUE_TYPE_TX,
			     NULL);
	napi_disable(&priv->napi);
	cancel_delayed_work_sync(&priv->refill_work);
	netif_tx_disable(pf->netdev);
	/* Once destroyed, the device no longer touches the buffers. */
	vrnic_ring_destroy(pf, &priv->tx, VRNIC_ETH_RING_TX);
	vrnic_ring_destroy(pf, &priv->rx, VRNIC_ETH_RING_RX);
	netdev_tx_reset_queue(netdev_get_tx_queue(pf->netdev, 0));
}

static u32 vrnic_rx_buf_len(int mtu)
{
	return ALIGN(mtu + ETH_HLEN + VLAN_HLEN, 64);
}

static int vrnic_program_mac(struct vrnic_pf *pf, const u8 *mac)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_SET_MAC };

	memcpy(cmd.set_mac.mac, mac, ETH_ALEN);
	return vrnic_pf_admin_exec(pf, &cmd, NULL);
}

/*
 * The device filters unicast on its own address: change it there first,
 * so that RX (and RoCE, whose GIDs ib_core re-adds with the new MAC)
 * follow.  Live changes are fine: the device swaps the address at once.
 */
static int vrnic_set_mac_address(struct net_device *ndev, void *p)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	struct sockaddr *sa = p;
	int ret;

	ret = eth_prepare_mac_addr_change(ndev, p);
	if (ret)
		return ret;
	ret = vrnic_program_mac(priv->pf, sa->sa_data);
	if (ret)
		return ret;
	eth_commit_mac_addr_change(ndev, p);
	return 0;
}

static void vrnic_rx_mode_work(struct work_struct *work)
{
	struct vrnic_netdev_priv *priv =
		container_of(work, struct vrnic_netdev_priv, rx_mode_work);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_SET_RX_FILTER };
	struct vrnic_admin_set_rx_filter *f = &cmd.set_rx_filter;
	struct net_device *ndev = priv->pf->netdev;
	struct netdev_hw_addr *ha;
	u32 flags = 0;
	int ret;

	netif_addr_lock_bh(ndev);
	if (ndev->flags & IFF_PROMISC)
		flags |= VRNIC_RX_FILTER_PROMISC;
	/* A list longer than the device's table: take every group. */
	if ((ndev->flags & IFF_ALLMULTI) ||
	    netdev_mc_count(ndev) > VRNIC_RX_FILTER_MAX_MC) {
		flags |= VRNIC_RX_FILTER_ALLMULTI;
	} else {
		netdev_for_each_mc_addr(ha, ndev) {
			if (f->mc_count >= VRNIC_RX_FILTER_MAX_MC)
				break;
			memcpy(f->mc[f->mc_count++], ha->addr, ETH_ALEN);
		}
	}
	netif_addr_unlock_bh(ndev);
	f->flags = cpu_to_le32(flags);
	ret = vrnic_pf_admin_exec(priv->pf, &cmd, NULL);
	if (ret)
		netdev_warn(ndev, "cannot program the receive filter: %d\n", ret);
}

/* Runs under the address list lock (atomic): the admin command waits. */
static void vrnic_set_rx_mode(struct net_device *ndev)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);

	schedule_work(&priv->rx_mode_work);
}

static int vrnic_open(struct net_device *ndev)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	int ret;

	/* After a device reset the device is back at its permanent MAC. */
	ret = vrnic_program_mac(priv->pf, ndev->dev_addr);
	if (ret)
		return ret;
	priv->rx_buf_len = vrnic_rx_buf_len(ndev->mtu);
	ret = vrnic_rings_alloc(priv, &priv->tx, &priv->rx, priv->rx_buf_len);
	if (ret)
		return ret;
	ret = vrnic_rings_start(priv);
	if (ret) {
		vrnic_rings_free(priv, &priv->tx, &priv->rx);
		return ret;
	}
	priv->rings_up = true;
	return 0;
}

/* Also for an interface whose rings a failed recovery did not restore. */
static int vrnic_stop(struct net_device *ndev)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);

	if (!priv->rings_up)
		return 0;
	priv->rings_up = false;
	vrnic_rings_stop(priv);
	vrnic_rings_free(priv, &priv->tx, &priv->rx);
	return 0;
}

/**
 * vrnic_eth_detach - take the data path down for a function reset
 * @pf: the function, dead (its admin queue fails every command)
 *
 * The netdev stays registered with its name, addresses and MTU; it is
 * marked not present, so that it cannot be opened or reconfigured until
 * vrnic_eth_attach().  Its rings are taken back and freed: the device is
 * quiesced, so it no longer touches them.  Context: RTNL held.
 */
void vrnic_eth_detach(struct vrnic_pf *pf)
{
	struct net_device *ndev = pf->netdev;
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);

	ASSERT_RTNL();
	netif_device_detach(ndev);
	netif_carrier_off(ndev);
	vrnic_stop(ndev);
	cancel_work_sync(&priv->rx_mode_work);
}

/**
 * vrnic_eth_attach - bring the data path back after a function reset
 * @pf: the function, enabled and answering admin commands again
 *
 * The device came out of its reset with its default MTU and its permanent
 * MAC and no receive filter: program what the netdev has, then give it
 * new rings if it is up.  Context: RTNL held.
 * Return: 0, or the errno of the step that failed (the netdev then stays
 * detached).
 */
int vrnic_eth_attach(struct vrnic_pf *pf)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_SET_PORT };
	struct net_device *ndev = pf->netdev;
	int ret;

	ASSERT_RTNL();
	cmd.set_port.mtu = cpu_to_le32(ndev->mtu);
	ret = vrnic_pf_admin_exec(pf, &cmd, NULL);
	if (ret)
		return ret;
	if (netif_running(ndev)) {
		ret = vrnic_open(ndev);
		if (ret)
			return ret;
	}
	netif_device_attach(ndev);
	vrnic_set_rx_mode(ndev);
	return 0;
}

static netdev_tx_t vrnic_start_xmit(struct sk_buff *skb,
				    struct net_device *ndev)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	struct netdev_queue *txq = netdev_get_tx_queue(ndev, 0);
	struct vrnic_eth_ring *r = &priv->tx;
	struct device *dev = &priv->pf->pdev->dev;
	struct vrnic_eth_desc *d;
	struct vrnic_eth_buf *b;
	unsigned int len;
	dma_addr_t dma;
	u32 idx;

	/* Cannot happen: the queue is stopped before the ring fills up.
	 * Announce what earlier xmit_more frames left unannounced.
	 */
	if (unlikely(!vrnic_ring_free(r))) {
		netif_tx_stop_queue(txq);
		netdev_err_once(ndev, "TX ring full while the queue is awake\n");
		vrnic_ring_doorbell(priv->pf, VRNIC_DB_ETH_TX, r->pi);
		return NETDEV_TX_BUSY;
	}
	if (skb_put_padto(skb, ETH_ZLEN))
		goto drop;	/* freed */
	len = skb->len;
	dma = dma_map_single(dev, skb->data, len, DMA_TO_DEVICE);
	if (dma_mapping_error(dev, dma)) {
		dev_kfree_skb_any(skb);
		goto drop;
	}
	idx = r->pi & (r->depth - 1);
	b = &r->bufs[idx];
	b->skb = skb;
	b->dma = dma;
	b->len = len;
	d = &r->desc[idx];
	d->addr = cpu_to_le64(dma);
	d->len = cpu_to_le16(len);
	d->flags = cpu_to_le16(VRNIC_ETH_DESC_EOP);
	d->wb_len = 0;
	d->wb_status = 0;
	r->pi++;
	skb_tx_timestamp(skb);

	/* Stop while the ring has no room for another frame; the helper
	 * re-checks after a barrier so that a concurrent clean cannot miss
	 * the wake.
	 */
	netif_txq_maybe_stop(txq, vrnic_ring_free(r), VRNIC_TX_STOP_THRS,
			     VRNIC_TX_WAKE_THRS);
	/* Ring the doorbell unless more frames follow (and the queue is
	 * still awake to send them).
	 */
	if (__netdev_tx_sent_queue(txq, len, netdev_xmit_more()))
		vrnic_ring_doorbell(priv->pf, VRNIC_DB_ETH_TX, r->pi);
	return NETDEV_TX_OK;

drop:
	dev_core_stats_tx_dropped_inc(ndev);
	/* Frames queued before with xmit_more wait for this doorbell; a
	 * doorbell with nothing new makes the device look again, no more.
	 */
	if (!netdev_xmit_more())
		vrnic_ring_doorbell(priv->pf, VRNIC_DB_ETH_TX, r->pi);
	return NETDEV_TX_OK;
}

static void vrnic_ring_stats_read(const struct vrnic_ring_stats *rs,
				  u64 *packets, u64 *bytes, u64 *errors)
{
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&rs->syncp);
		*packets = u64_stats_read(&rs->packets);
		*bytes = u64_stats_read(&rs->bytes);
		*errors = u64_stats_read(&rs->errors);
	} while (u64_stats_fetch_retry(&rs->syncp, start));
}

/* Dropped packets come from the core's per-CPU counters (dev_get_stats). */
static void vrnic_get_stats64(struct net_device *ndev,
			      struct rtnl_link_stats64 *s)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);

	vrnic_ring_stats_read(&priv->rx_stats, &s->rx_packets, &s->rx_bytes,
			      &s->rx_errors);
	vrnic_ring_stats_read(&priv->tx_stats, &s->tx_packets, &s->tx_bytes,
			      &s->tx_errors);
}

/* The stack saw the queue stopped for a watchdog period.  Completions
 * should have woken it: log the ring state, ring the TX doorbell again in
 * case the device missed it, and run the NAPI poll to reap and re-arm.
 * The stack counts the event in the queue's tx_timeout attribute.
 */
static void vrnic_tx_timeout(struct net_device *ndev, unsigned int txqueue)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	struct vrnic_eth_ring *r = &priv->tx;

	netdev_warn(ndev, "TX timeout on queue %u: pi %u ci %u free %u\n",
		    txqueue, r->pi, r->ci, vrnic_ring_free(r));
	if (!READ_ONCE(priv->rings_live))
		return;
	vrnic_ring_doorbell(priv->pf, VRNIC_DB_ETH_TX, r->pi);
	napi_schedule(&priv->napi);
}

/* Change the MTU without a window in which a failure leaves the
 * interface up without rings: the rings for the new MTU are allocated
 * and filled first, and the old ones are released only once the device
 * runs on the new ones.  On failure the old configuration keeps running.
 */
static int vrnic_change_mtu(struct net_device *ndev, int mtu)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_SET_PORT };
	struct vrnic_eth_ring old_tx, old_rx, new_tx = {}, new_rx = {};
	u32 old_len = priv->rx_buf_len, new_len = vrnic_rx_buf_len(mtu);
	bool running = netif_running(ndev);
	int ret, ret2;

	if (running) {
		ret = vrnic_rings_alloc(priv, &new_tx, &new_rx, new_len);
		if (ret)
			return ret;
	}
	cmd.set_port.mtu = cpu_to_le32(mtu);
	ret = vrnic_pf_admin_exec(priv->pf, &cmd, NULL);
	if (ret)
		goto err_free_new;
	if (!running) {
		WRITE_ONCE(ndev->mtu, mtu);
		return 0;
	}

	vrnic_rings_stop(priv);
	old_tx = priv->tx;
	old_rx = priv->rx;
	priv->tx = new_tx;
	priv->rx = new_rx;
	priv->rx_buf_len = new_len;
	ret = vrnic_rings_start(priv);
	if (!ret) {
		WRITE_ONCE(ndev->mtu, mtu);
		vrnic_rings_free(priv, &old_tx, &old_rx);
		return 0;
	}

	/* Back to the old rings and MTU.  The device starts a created ring
	 * at index 0: restart both old rings empty, refill the RX one.
	 */
	new_tx = priv->tx;
	new_rx = priv->rx;
	priv->tx = old_tx;
	priv->rx = old_rx;
	priv->rx_buf_len = old_len;
	vrnic_ring_reset(priv->pf, &priv->tx, DMA_TO_DEVICE);
	vrnic_ring_reset(priv->pf, &priv->rx, DMA_FROM_DEVICE);
	while (vrnic_ring_free(&priv->rx) &&
	       vrnic_rx_post_one(&priv->rx, old_len, GFP_KERNEL))
		;
	cmd.set_port.mtu = cpu_to_le32(ndev->mtu);
	ret2 = vrnic_pf_admin_exec(priv->pf, &cmd, NULL);
	if (!ret2)
		ret2 = vrnic_rings_start(priv);
	if (ret2) {
		/* The device refuses its rings: stay up without a data path
		 * but with NAPI enabled and rings allocated, so that ndo_stop
		 * still works.
		 */
		netdev_err(ndev, "cannot restore the rings after a failed MTU change: %d\n",
			   ret2);
		netif_carrier_off(ndev);
		napi_enable(&priv->napi);
	}
err_free_new:
	if (running)
		vrnic_rings_free(priv, &new_tx, &new_rx);
	return ret;
}

static const struct net_device_ops vrnic_netdev_ops = {
	.ndo_open = vrnic_open,
	.ndo_stop = vrnic_stop,
	.ndo_start_xmit = vrnic_start_xmit,
	.ndo_tx_timeout = vrnic_tx_timeout,
	.ndo_get_stats64 = vrnic_get_stats64,
	.ndo_change_mtu = vrnic_change_mtu,
	.ndo_set_mac_address = vrnic_set_mac_address,
	.ndo_set_rx_mode = vrnic_set_rx_mode,
	.ndo_validate_addr = eth_validate_addr,
};

static const char vrnic_stat_names[][ETH_GSTRING_LEN] = {
	"dev_eth_tx_frames", "dev_eth_tx_bytes", "dev_eth_rx_frames",
	"dev_eth_rx_bytes", "dev_eth_rx_drops", "dev_roce_rx_frames",
	"dev_db_violations", "dev_eq_overflows", "dev_dma_errors",
	"dev_admin_cmds",
};

static void vrnic_get_drvinfo(struct net_device *ndev,
			      struct ethtool_drvinfo *info)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	u32 ver = le32_to_cpu(priv->pf->attr.spec_version);

	strscpy(info->driver, DRV_NAME, sizeof(info->driver));
	strscpy(info->bus_info, pci_name(priv->pf->pdev),
		sizeof(info->bus_info));
	snprintf(info->fw_version, sizeof(info->fw_version), "spec %u.%u",
		 ver >> 16, ver & 0xffff);
}

/*
 * Then the port's per-priority PFC counters (QUERY_PORT_STATS), by mlx5's
 * names: rx_prio<p>_pause, rx_prio<p>_pause_duration (us),
 * rx_prio<p>_pause_transition and tx_prio<p>_pause, priority by priority,
 * then tx_pause_storm_error_events.
 */
#define VRNIC_PRIO_STATS	4
#define VRNIC_NUM_ETH_STATS	(ARRAY_SIZE(vrnic_stat_names) + \
				 VRNIC_PRIO_STATS * VRNIC_NUM_PRIOS + 1)

static const char vrnic_test_names[VRNIC_SELF_TESTS][ETH_GSTRING_LEN] = {
	"scratch register", "interrupt per vector", "test DMA",
};

static int vrnic_get_sset_count(struct net_device *ndev, int sset)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);

	switch (sset) {
	case ETH_SS_STATS:
		return VRNIC_NUM_ETH_STATS;
	case ETH_SS_TEST:
		return vrnic_pf_has_self_test(priv->pf) ? VRNIC_SELF_TESTS :
							  -EOPNOTSUPP;
	default:
		return -EOPNOTSUPP;
	}
}

static void vrnic_get_strings(struct net_device *ndev, u32 sset, u8 *data)
{
	unsigned int i, p;

	if (sset == ETH_SS_TEST) {
		memcpy(data, vrnic_test_names, sizeof(vrnic_test_names));
		return;
	}
	if (sset != ETH_SS_STATS)
		return;
	for (i = 0; i < ARRAY_SIZE(vrnic_stat_names); i++)
		ethtool_puts(&data, vrnic_stat_names[i]);
	for (p = 0; p < VRNIC_NUM_PRIOS; p++) {
		ethtool_sprintf(&data, "rx_prio%u_pause", p);
		ethtool_sprintf(&data, "rx_prio%u_pause_duration", p);
		ethtool_sprintf(&data, "rx_prio%u_pause_transition", p);
		ethtool_sprintf(&data, "tx_prio%u_pause", p);
	}
	ethtool_puts(&data, "tx_pause_storm_error_events");
}

static void vrnic_get_ethtool_stats(struct net_device *ndev,
				    struct ethtool_stats *stats, u64 *data)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	struct vrnic_port_stats ps;
	struct vrnic_stats st;
	const __le64 *v = (const __le64 *)&st;
	unsigned int i, p;

	/*
	 * The function-wide counters; the RoCE ones are rdma statistic's
	 * (dev_roce_rx_frames is in both, the port's count of RoCE frames).
	 */
	BUILD_BUG_ON(offsetof(struct vrnic_stats, sent_pkts) !=
		     sizeof(u64) * ARRAY_SIZE(vrnic_stat_names));
	if (vrnic_pf_admin_query(priv->pf, VRNIC_ADMIN_QUERY_STATS, &st,
				 sizeof(st)))
		memset(&st, 0, sizeof(st));
	for (i = 0; i < ARRAY_SIZE(vrnic_stat_names); i++)
		*data++ = le64_to_cpu(v[i]);
	if (vrnic_pf_admin_query(priv->pf, VRNIC_ADMIN_QUERY_PORT_STATS, &ps,
				 sizeof(ps)))
		memset(&ps, 0, sizeof(ps));
	for (p = 0; p < VRNIC_NUM_PRIOS; p++) {
		*data++ = le64_to_cpu(ps.rx_pause[p]);
		*data++ = le64_to_cpu(ps.rx_pause_duration_us[p]);
		*data++ = le64_to_cpu(ps.rx_pause_transition[p]);
		*data++ = le64_to_cpu(ps.tx_pause[p]);
	}
	*data = le64_to_cpu(ps.tx_pause_storm_error_events);
}

/*
 * The port speed the device reports (QUERY_PORT), full duplex, while the
 * link is up; ib_get_eth_speed() derives the RoCE port's speed from it.
 */
static int vrnic_get_link_ksettings(struct net_device *ndev,
				    struct ethtool_link_ksettings *ks)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);
	struct vrnic_port_attr pa;

	ethtool_link_ksettings_zero_link_mode(ks, supported);
	ethtool_link_ksettings_zero_link_mode(ks, advertising);
	ks->base.port = PORT_OTHER;
	ks->base.autoneg = AUTONEG_DISABLE;
	ks->base.speed = SPEED_UNKNOWN;
	ks->base.duplex = DUPLEX_UNKNOWN;
	if (!netif_carrier_ok(ndev))
		return 0;
	if (vrnic_pf_admin_query(priv->pf, VRNIC_ADMIN_QUERY_PORT, &pa,
				 sizeof(pa)) ||
	    !le32_to_cpu(pa.speed_mbps) || le32_to_cpu(pa.speed_mbps) > INT_MAX)
		return 0;
	ks->base.speed = le32_to_cpu(pa.speed_mbps);
	ks->base.duplex = DUPLEX_FULL;
	return 0;
}

/*
 * The test registers, online: the function keeps running (ethtool -t).
 * An interface that is down is tested too; a dead function is not.
 */
static void vrnic_self_test(struct net_device *ndev, struct ethtool_test *et,
			    u64 *data)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(ndev);

	if (READ_ONCE(priv->pf->aq.dead) ||
	    !vrnic_pf_self_test(priv->pf, data))
		et->flags |= ETH_TEST_FL_FAILED;
}

/* One TX and one RX ring of fixed depth, one queue pair. */
static void vrnic_get_ringparam(struct net_device *ndev,
				struct ethtool_ringparam *ring,
				struct kernel_ethtool_ringparam *kring,
				struct netlink_ext_ack *extack)
{
	ring->rx_max_pending = 1U << VRNIC_ETH_LOG_DEPTH;
	ring->tx_max_pending = 1U << VRNIC_ETH_LOG_DEPTH;
	ring->rx_pending = 1U << VRNIC_ETH_LOG_DEPTH;
	ring->tx_pending = 1U << VRNIC_ETH_LOG_DEPTH;
	kring->rx_buf_len = vrnic_priv(ndev)->rx_buf_len;
}

static void vrnic_get_channels(struct net_device *ndev,
			       struct ethtool_channels *ch)
{
	ch->max_combined = 1;
	ch->combined_count = 1;
	/* The async EQ's vector: admin completions, port and fatal events. */
	ch->max_other = 1;
	ch->other_count = 1;
}

static const struct ethtool_ops vrnic_ethtool_ops = {
	.get_drvinfo = vrnic_get_drvinfo,
	.self_test = vrnic_self_test,
	.get_ringparam = vrnic_get_ringparam,
	.get_channels = vrnic_get_channels,
	.get_link = ethtool_op_get_link,
	.get_link_ksettings = vrnic_get_link_ksettings,
	.get_sset_count = vrnic_get_sset_count,
	.get_strings = vrnic_get_strings,
	.get_ethtool_stats = vrnic_get_ethtool_stats,
};

/*
 * No port, ETH or fatal event touches the netdev once this returns: none
 * starts, none runs on any vector, and a fatal work item that saw the
 * netdev is done with it.
 */
static void vrnic_netdev_events_off(struct vrnic_pf *pf)
{
	unsigned int i;

	WRITE_ONCE(pf->port_events, false);
	WRITE_ONCE(pf->eth_events, false);
	for (i = 0; i < pf->num_vectors; i++)
		synchronize_irq(pci_irq_vector(pf->pdev, i));
	cancel_work_sync(&pf->fatal_work);
	mutex_lock(&pf->fatal_lock);
	mutex_unlock(&pf->fatal_lock);
}

int vrnic_netdev_register(struct vrnic_pf *pf)
{
	struct vrnic_netdev_priv *priv;
	struct net_device *ndev;
	u32 lo, hi;
	u8 mac[ETH_ALEN];
	int ret;

	ndev = alloc_etherdev(sizeof(*priv));
	if (!ndev)
		return -ENOMEM;
	SET_NETDEV_DEV(ndev, &pf->pdev->dev);
	priv = netdev_priv(ndev);
	priv->pf = pf;
	pf->netdev = ndev;

	lo = vrnic_rd(pf, VRNIC_REG_MAC_LO);
	hi = vrnic_rd(pf, VRNIC_REG_MAC_HI);
	mac[0] = lo;
	mac[1] = lo >> 8;
	mac[2] = lo >> 16;
	mac[3] = lo >> 24;
	mac[4] = hi;
	mac[5] = hi >> 8;
	if (is_valid_ether_addr(mac))
		eth_hw_addr_set(ndev, mac);
	else
		eth_hw_addr_random(ndev);

	INIT_WORK(&priv->rx_mode_work, vrnic_rx_mode_work);
	INIT_DELAYED_WORK(&priv->refill_work, vrnic_refill_work);
	u64_stats_init(&priv->tx_stats.syncp);
	u64_stats_init(&priv->rx_stats.syncp);
	ndev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	ndev->netdev_ops = &vrnic_netdev_ops;
	ndev->ethtool_ops = &vrnic_ethtool_ops;
	ndev->min_mtu = VRNIC_ETH_MIN_MTU;
	ndev->max_mtu = min_t(u32, vrnic_rd(pf, VRNIC_REG_MAX_MTU),
			      VRNIC_ETH_MAX_MTU);
	netif_napi_add(ndev, &priv->napi, vrnic_napi_poll);
	netif_napi_set_irq(&priv->napi, pci_irq_vector(pf->pdev, VRNIC_ETH_EQN));
	netif_carrier_off(ndev);

	/*
	 * ETH events reach the netdev before it is registered: an open right
	 * after register_netdev() arms the rings, and its first event must
	 * not be lost (rings_live gates NAPI until then).  Port and fatal
	 * events wait for a registered netdev: a failed registration unlists
	 * it inside register_netdev(), and a carrier change from then on
	 * would queue it for linkwatch after the core's last wait for it.
	 */
	WRITE_ONCE(pf->eth_events, true);
	ret = register_netdev(ndev);
	if (ret) {
		vrnic_netdev_events_off(pf);
		netif_napi_del(&priv->napi);
		free_netdev(ndev);
		pf->netdev = NULL;
		return ret;
	}
	WRITE_ONCE(pf->port_events, true);
	/* A port event raised before the line above was dropped. */
	vrnic_eth_link_sync(pf);
	return 0;
}

void vrnic_netdev_unregister(struct vrnic_pf *pf)
{
	struct vrnic_netdev_priv *priv = vrnic_priv(pf->netdev);

	vrnic_netdev_events_off(pf);
	unregister_netdev(pf->netdev);
	cancel_work_sync(&priv->rx_mode_work);
	netif_napi_del(&priv->napi);
	free_netdev(pf->netdev);
	pf->netdev = NULL;
}
