// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic memory regions.  User MRs are pinned with ib_umem and described to
 * the device by a page list that the device copies at creation; the
 * kernel's DMA MR uses the device's physical mode (iova = bus address).
 */
#include <linux/dma-mapping.h>

#include "vrnic.h"

/*
 * IB access flags and the device's, both ways.  FLUSH_PERSISTENT is for
 * QPs only: ib_core refuses it for MRs (no IB_DEVICE_FLUSH_PERSISTENT).
 */
static const struct {
	u32 vrnic;
	int ib;
} vrnic_access_map[] = {
	{ VRNIC_ACCESS_LOCAL_WRITE, IB_ACCESS_LOCAL_WRITE },
	{ VRNIC_ACCESS_REMOTE_WRITE, IB_ACCESS_REMOTE_WRITE },
	{ VRNIC_ACCESS_REMOTE_READ, IB_ACCESS_REMOTE_READ },
	{ VRNIC_ACCESS_REMOTE_ATOMIC, IB_ACCESS_REMOTE_ATOMIC },
	{ VRNIC_ACCESS_FLUSH_GLOBAL, IB_ACCESS_FLUSH_GLOBAL },
	{ VRNIC_ACCESS_FLUSH_PERSISTENT, IB_ACCESS_FLUSH_PERSISTENT },
	{ VRNIC_ACCESS_MW_BIND, IB_ACCESS_MW_BIND },
};

u32 vrnic_ib_access(int ib_access)
{
	u32 a = 0;
	int i;

	for (i = 0; i < ARRAY_SIZE(vrnic_access_map); i++)
		if (ib_access & vrnic_access_map[i].ib)
			a |= vrnic_access_map[i].vrnic;
	return a;
}

int vrnic_ib_to_ib_access(u32 access)
{
	int ib = 0;
	int i;

	for (i = 0; i < ARRAY_SIZE(vrnic_access_map); i++)
		if (access & vrnic_access_map[i].vrnic)
			ib |= vrnic_access_map[i].ib;
	return ib;
}

static int vrnic_ib_create_mr_cmd(struct vrnic_dev *vdev,
				  struct vrnic_admin_cmd *cmd, struct vrnic_mr *mr)
{
	u32 key;
	int ret;

	cmd->opcode = VRNIC_ADMIN_CREATE_MR;
	ret = vrnic_ib_admin_exec(vdev, cmd, &key);
	if (ret)
		return ret;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	return 0;
}

struct ib_mr *vrnic_ib_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct vrnic_dev *vdev = to_vdev(ibpd->device);
	struct vrnic_admin_cmd cmd = {};
	struct vrnic_mr *mr;
	int ret;

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	cmd.create_mr.iova = 0;
	cmd.create_mr.length = cpu_to_le64(U64_MAX);
	cmd.create_mr.pdn = cpu_to_le32(to_vpd(ibpd)->pdn);
	cmd.create_mr.access = cpu_to_le32(vrnic_ib_access(access) |
					   VRNIC_ACCESS_LOCAL_WRITE);
	cmd.create_mr.pbl_mode = VRNIC_PBL_PHYS;
	ret = vrnic_ib_create_mr_cmd(vdev, &cmd, mr);
	if (ret) {
		kfree(mr);
		return ERR_PTR(ret);
	}
	return &mr->ibmr;
}

/*
 * A user MR's page list for the device (LEVEL2): level-1 pages of 512
 * addresses, each its own 4 KiB coherent page, and the level-2 list of
 * their addresses (8 bytes per level-1 page: at most 16 KiB, for 2^20
 * pages).  Nothing larger is allocated, so a large MR does not need a
 * large physically contiguous allocation.
 */
struct vrnic_mr_pbl {
	__le64 *l2;
	dma_addr_t l2_dma;
	__le64 **l1;
	/*
	 * The level-1 pages' DMA handles, kept here and not read back from
	 * l2: the device can write l2, and freeing an address it chose would
	 * unmap someone else's memory and leave this page mapped.
	 */
	dma_addr_t *l1_dma;
	size_t nl1;
};

#define VRNIC_PBL_PAGE_SIZE	(VRNIC_PBL_PER_PAGE * sizeof(__le64))

static void vrnic_ib_mr_pbl_free(struct vrnic_dev *vdev, struct vrnic_mr_pbl *p)
{
	struct device *dev = &vdev->pdev->dev;
	size_t i;

	for (i = 0; p->l1 && p->l1_dma && i < p->nl1; i++)
		if (p->l1[i])
			dma_free_coherent(dev, VRNIC_PBL_PAGE_SIZE, p->l1[i],
					  p->l1_dma[i]);
	kvfree(p->l1);
	kvfree(p->l1_dma);
	if (p->l2)
		dma_free_coherent(dev, p->nl1 * sizeof(*p->l2), p->l2,
				  p->l2_dma);
}

static int vrnic_ib_mr_pbl_fill(struct vrnic_dev *vdev, struct ib_umem *umem,
				unsigned long pgsz, size_t npages,
				struct vrnic_mr_pbl *p)
{
	struct device *dev = &vdev->pdev->dev;
	struct ib_block_iter biter;
	size_t i;

	p->nl1 = DIV_ROUND_UP(npages, VRNIC_PBL_PER_PAGE);
	p->l1 = kvcalloc(p->nl1, sizeof(*p->l1), GFP_KERNEL);
	p->l1_dma = kvcalloc(p->nl1, sizeof(*p->l1_dma), GFP_KERNEL);
	p->l2 = dma_alloc_coherent(dev, p->nl1 * sizeof(*p->l2), &p->l2_dma,
				   GFP_KERNEL);
	if (!p->l1 || !p->l1_dma || !p->l2)
		return -ENOMEM;
	for (i = 0; i < p->nl1; i++) {
		p->l1[i] = dma_alloc_coherent(dev, VRNIC_PBL_PAGE_SIZE,
					      &p->l1_dma[i], GFP_KERNEL);
		if (!p->l1[i])
			return -ENOMEM;
		p->l2[i] = cpu_to_le64(p->l1_dma[i]);
	}
	i = 0;
	rdma_umem_for_each_dma_block(umem, &biter, pgsz) {
		if (i == npages)
			break;
		p->l1[i / VRNIC_PBL_PER_PAGE][i % VRNIC_PBL_PER_PAGE] =
			cpu_to_le64(rdma_block_iter_dma_address(&biter));
		i++;
	}
	return 0;
}

/*
 * Whether [virt, virt + length) fits in the device's MR page limit even
 * in 4 KiB pages: checked before anything is pinned, so a request that
 * could never be registered fails at once.  The largest user MR is thus
 * 2^20 * 4 KiB = 4 GiB (what QUERY_DEVICE reports as max_mr_size),
 * whatever page size it ends up with.
 */
static bool vrnic_ib_mr_size_ok(u64 start, u64 length, u64 virt)
{
	u64 end;

	if (!length || check_add_overflow(start, length - 1, &end) ||
	    check_add_overflow(virt, length - 1, &end))
		return false;
	return (end >> 12) - (virt >> 12) < VRNIC_MAX_MR_PAGES;
}

struct ib_mr *vrnic_ib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 virt, int access, struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibpd->device);
	struct vrnic_admin_cmd cmd = {};
	struct vrnic_mr_pbl pbl = {};
	struct ib_block_iter biter;
	unsigned long pgsz;
	struct vrnic_mr *mr;
	size_t npages, i;
	int ret;

	ret = vrnic_ib_udata_no_req(udata);
	if (ret)
		return ERR_PTR(ret);
	/* Optional flags (relaxed ordering) may be ignored, the rest not. */
	access &= ~IB_ACCESS_OPTIONAL;
	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC |
		       IB_ACCESS_FLUSH_GLOBAL | IB_ACCESS_MW_BIND))
		return ERR_PTR(-EOPNOTSUPP);
	if (!vrnic_ib_mr_size_ok(start, length, virt))
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		goto err_free;
	}
	/* 0 when no size fits (virt and start differ within 4 KiB). */
	pgsz = ib_umem_find_best_pgsz(mr->umem, VRNIC_MR_PGSZ_BITMAP, virt);
	if (!pgsz) {
		ret = -EINVAL;
		goto err_umem;
	}
	npages = ib_umem_num_dma_blocks(mr->umem, pgsz);
	if (!npages || npages > VRNIC_MAX_MR_PAGES) {
		ret = -EINVAL;
		goto err_umem;
	}
	mr->ibmr.page_size = pgsz;

	cmd.create_mr.iova = cpu_to_le64(virt);
	cmd.create_mr.length = cpu_to_le64(length);
	cmd.create_mr.pdn = cpu_to_le32(to_vpd(ibpd)->pdn);
	cmd.create_mr.access = cpu_to_le32(vrnic_ib_access(access));
	cmd.create_mr.npages = cpu_to_le32(npages);
	cmd.create_mr.page_shift = __ffs(pgsz);

	if (npages <= 3) {
		__le64 pages[3] = {};

		i = 0;
		rdma_umem_for_each_dma_block(mr->umem, &biter, pgsz) {
			if (i == npages)
				break;
			pages[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));
		}
		cmd.create_mr.pbl_mode = VRNIC_PBL_INLINE;
		cmd.create_mr.pbl = pages[0];
		cmd.create_mr.inline_pages[0] = pages[1];
		cmd.create_mr.inline_pages[1] = pages[2];
	} else {
		ret = vrnic_ib_mr_pbl_fill(vdev, mr->umem, pgsz, npages, &pbl);
		if (ret)
			goto err_lists;
		cmd.create_mr.pbl_mode = VRNIC_PBL_LEVEL2;
		cmd.create_mr.pbl = cpu_to_le64(pbl.l2_dma);
	}
	/* The device copies the list during the command. */
	ret = vrnic_ib_create_mr_cmd(vdev, &cmd, mr);
	if (ret)
		goto err_lists;
	vrnic_ib_mr_pbl_free(vdev, &pbl);
	return &mr->ibmr;

err_lists:
	vrnic_ib_mr_pbl_free(vdev, &pbl);
err_umem:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

/* rdma res show mr -dd: the page size the device maps the MR with. */
int vrnic_ib_fill_res_mr_entry(struct sk_buff *msg, struct ib_mr *ibmr)
{
	struct vrnic_mr *mr = container_of(ibmr, struct vrnic_mr, ibmr);
	struct nlattr *table;

	if (!mr->umem)
		return 0;
	table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
	if (!table)
		return -EMSGSIZE;
	if (rdma_nl_put_driver_u32_hex(msg, "page_size", ibmr->page_size) ||
	    rdma_nl_put_driver_u64(msg, "pages",
				   ib_umem_num_dma_blocks(mr->umem,
							  ibmr->page_size))) {
		nla_nest_cancel(msg, table);
		return -EMSGSIZE;
	}
	nla_nest_end(msg, table);
	return 0;
}

/*
 * Fast registration (FRWR) for kernel ULPs: the device MR is created
 * invalid with room for max_num_sg pages; map_mr_sg fills a page list in
 * coherent memory and an IB_WR_REG_MR work request hands it to the device,
 * which reads it when the SQ reaches the request.
 */
struct ib_mr *vrnic_ib_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
				u32 max_num_sg)
{
	struct vrnic_dev *vdev = to_vdev(ibpd->device);
	struct vrnic_admin_cmd cmd = {};
	struct vrnic_mr *mr;
	int ret;

	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > VRNIC_MAX_FAST_REG_PAGES)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->max_pages = max_num_sg;
	mr->pbl = dma_alloc_coherent(&vdev->pdev->dev,
				     max_num_sg * sizeof(*mr->pbl),
				     &mr->pbl_dma, GFP_KERNEL);
	if (!mr->pbl) {
		ret = -ENOMEM;
		goto err_free;
	}
	cmd.create_mr.pdn = cpu_to_le32(to_vpd(ibpd)->pdn);
	cmd.create_mr.npages = cpu_to_le32(max_num_sg);
	cmd.create_mr.pbl_mode = VRNIC_PBL_FAST;
	ret = vrnic_ib_create_mr_cmd(vdev, &cmd, mr);
	if (ret)
		goto err_pbl;
	return &mr->ibmr;

err_pbl:
	dma_free_coherent(&vdev->pdev->dev, max_num_sg * sizeof(*mr->pbl),
			  mr->pbl, mr->pbl_dma);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

static int vrnic_ib_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct vrnic_mr *mr = container_of(ibmr, struct vrnic_mr, ibmr);

	if (mr->npages == mr->max_pages)
		return -ENOMEM;
	mr->pbl[mr->npages++] = cpu_to_le64(addr);
	return 0;
}

int vrnic_ib_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		       unsigned int *sg_offset)
{
	struct vrnic_mr *mr = container_of(ibmr, struct vrnic_mr, ibmr);

	mr->npages = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, vrnic_ib_set_page);
}

int vrnic_ib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct vrnic_mr *mr = container_of(ibmr, struct vrnic_mr, ibmr);
	struct vrnic_dev *vdev = to_vdev(ibmr->device);
	int ret;

	/*
	 * A refusal quiesces the function first (vrnic_pf_destroy()).  BUSY
	 * (a memory window is bound to the MR) is the process's to resolve:
	 * the MR stays registered.  Kernel ULPs bind no windows.
	 */
	ret = vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_MR, ibmr->lkey,
			       "MR");
	if (ret && mr->umem)
		return ret;
	if (ret)
		vrnic_pf_fatal(vdev->pf, "kernel MR destroy refused");
	if (mr->pbl)
		dma_free_coherent(&vdev->pdev->dev,
				  mr->max_pages * sizeof(*mr->pbl), mr->pbl,
				  mr->pbl_dma);
	ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/*
 * Memory windows live in the device's MR table.  Binding is a work
 * request (user space posts it), so the kernel only allocates and frees.
 */
int vrnic_ib_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_ALLOC_MW };
	u32 key;
	int ret;

	ret = vrnic_ib_udata_no_req(udata);
	if (ret)
		return ret;
	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	cmd.alloc_mw.pdn = cpu_to_le32(to_vpd(ibmw->pd)->pdn);
	cmd.alloc_mw.type = ibmw->type == IB_MW_TYPE_1 ? VRNIC_MW_TYPE_1 :
							 VRNIC_MW_TYPE_2;
	ret = vrnic_ib_admin_exec(to_vdev(ibmw->device), &cmd, &key);
	if (ret)
		return ret;
	ibmw->rkey = key;
	return 0;
}

int vrnic_ib_dealloc_mw(struct ib_mw *ibmw)
{
	/* A refusal quiesces the function (vrnic_pf_destroy()). */
	vrnic_pf_destroy(to_vdev(ibmw->device)->pf, VRNIC_ADMIN_DEALLOC_MW,
			 ibmw->rkey, "MW");
	return 0;
}
