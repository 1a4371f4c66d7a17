// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic queue memory: kernel rings in single pages, the page lists of
 * kernel and pinned user rings, which the device copies at create, and
 * the doorbell record pages that a context's CQs, QPs and SRQs share.
 */
#include <linux/dma-mapping.h>

#include "vrnic.h"

/*
 * The 4 KiB DMA blocks of a umem as a le64 list in coherent memory, for a
 * device that copies it during the admin command.
 */
static __le64 *vrnic_ib_list_alloc(struct vrnic_dev *vdev, size_t n,
				   dma_addr_t *list_dma, size_t *list_size)
{
	*list_size = max_t(size_t, n, 1) * sizeof(__le64);
	return dma_alloc_coherent(&vdev->pdev->dev, *list_size, list_dma,
				  GFP_KERNEL);
}

int vrnic_ib_umem_page_list(struct vrnic_dev *vdev, struct ib_umem *umem,
			    __le64 **list, dma_addr_t *list_dma, size_t *list_size)
{
	size_t n = ib_umem_num_dma_blocks(umem, SZ_4K), i = 0;
	struct ib_block_iter biter;
	__le64 *l;

	l = vrnic_ib_list_alloc(vdev, n, list_dma, list_size);
	if (!l)
		return -ENOMEM;
	rdma_umem_for_each_dma_block(umem, &biter, SZ_4K) {
		if (i == n)
			break;
		l[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));
	}
	*list = l;
	return 0;
}

/* Pin a user ring and build the page list the device copies. */
int vrnic_ib_ring_pin(struct vrnic_dev *vdev, u64 addr, size_t size,
		      struct ib_umem **umem, __le64 **list, dma_addr_t *dma,
		      size_t *list_size)
{
	if (addr & (SZ_4K - 1))
		return -EINVAL;
	*umem = ib_umem_get(&vdev->ibdev, addr, size, IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(*umem)) {
		int ret = PTR_ERR(*umem);

		*umem = NULL;
		return ret;
	}
	return vrnic_ib_umem_page_list(vdev, *umem, list, dma, list_size);
}

/*
 * Pin the user page holding a doorbell record, or take another reference
 * on it when an object of the same context already pinned it (mlx5's
 * mlx5_ib_db_map_user); *dma is the record's bus address.
 */
int vrnic_ib_pin_dbrec(struct ib_udata *udata, u64 addr,
		       struct vrnic_dbrec_page **pagep, dma_addr_t *dma)
{
	struct vrnic_ucontext *uctx =
		rdma_udata_to_drv_context(udata, struct vrnic_ucontext,
					  ibucontext);
	struct vrnic_dbrec_page *page;
	struct ib_block_iter biter;
	int ret = 0;

	if (!uctx || (addr & 7))
		return -EINVAL;
	mutex_lock(&uctx->dbrec_lock);
	list_for_each_entry(page, &uctx->dbrec_pages, list)
		if (page->user_virt == (addr & PAGE_MASK))
			goto found;
	page = kzalloc(sizeof(*page), GFP_KERNEL);
	if (!page) {
		ret = -ENOMEM;
		goto out;
	}
	page->uctx = uctx;
	page->user_virt = addr & PAGE_MASK;
	page->umem = ib_umem_get(uctx->ibucontext.device, page->user_virt,
				 PAGE_SIZE, IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(page->umem)) {
		ret = PTR_ERR(page->umem);
		kfree(page);
		goto out;
	}
	ret = -EINVAL;
	rdma_umem_for_each_dma_block(page->umem, &biter, PAGE_SIZE) {
		page->dma = rdma_block_iter_dma_address(&biter);
		ret = 0;
		break;
	}
	if (ret) {
		ib_umem_release(page->umem);
		kfree(page);
		goto out;
	}
	list_add(&page->list, &uctx->dbrec_pages);
found:
	page->refcnt++;
	*pagep = page;
	*dma = page->dma + (addr & ~PAGE_MASK);
out:
	mutex_unlock(&uctx->dbrec_lock);
	return ret;
}

/* Drop an object's reference on its doorbell record page (NULL: none). */
void vrnic_ib_unpin_dbrec(struct vrnic_dbrec_page *page)
{
	struct vrnic_ucontext *uctx;

	if (!page)
		return;
	uctx = page->uctx;
	mutex_lock(&uctx->dbrec_lock);
	if (!--page->refcnt) {
		list_del(&page->list);
		ib_umem_release(page->umem);
		kfree(page);
	}
	mutex_unlock(&uctx->dbrec_lock);
}

void vrnic_ib_kring_free(struct vrnic_dev *vdev, struct vrnic_ib_kring *r)
{
	u32 i;

	for (i = 0; r->va && i < r->npages; i++)
		if (r->va[i])
			dma_free_coherent(&vdev->pdev->dev, VRNIC_RING_PAGE_SIZE,
					  r->va[i], r->dma[i]);
	kvfree(r->va);
	kvfree(r->dma);
	memset(r, 0, sizeof(*r));
}

/*
 * A kernel ring of 2^log_depth entries of 2^shift bytes, zeroed, and the
 * list of its pages for the create command (the caller frees it once the
 * device has copied it).
 */
int vrnic_ib_kring_alloc(struct vrnic_dev *vdev, struct vrnic_ib_kring *r,
			 u32 log_depth, u32 shift, __le64 **list,
			 dma_addr_t *list_dma, size_t *list_size)
{
	struct device *dev = &vdev->pdev->dev;
	size_t size = (size_t)1 << (log_depth + shift);
	__le64 *l;
	u32 i;

	if (shift > ilog2(VRNIC_RING_PAGE_SIZE))
		return -EINVAL;
	r->npages = DIV_ROUND_UP(size, VRNIC_RING_PAGE_SIZE);
	r->shift = shift;
	r->mask = BIT(log_depth) - 1;
	r->va = kvcalloc(r->npages, sizeof(*r->va), GFP_KERNEL);
	r->dma = kvcalloc(r->npages, sizeof(*r->dma), GFP_KERNEL);
	if (!r->va || !r->dma)
		goto err;
	for (i = 0; i < r->npages; i++) {
		r->va[i] = dma_alloc_coherent(dev, VRNIC_RING_PAGE_SIZE,
					      &r->dma[i], GFP_KERNEL);
		if (!r->va[i])
			goto err;
	}
	l = vrnic_ib_list_alloc(vdev, r->npages, list_dma, list_size);
	if (!l)
		goto err;
	for (i = 0; i < r->npages; i++)
		l[i] = cpu_to_le64(r->dma[i]);
	*list = l;
	return 0;
err:
	vrnic_ib_kring_free(vdev, r);
	return -ENOMEM;
}
