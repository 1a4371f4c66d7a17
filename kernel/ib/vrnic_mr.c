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

int vrnic_to_ib_access(u32 access)
{
	int ib = 0;
	int i;

	for (i = 0; i < ARRAY_SIZE(vrnic_access_map); i++)
		if (access & vrnic_access_map[i].vrnic)
			ib |= vrnic_access_map[i].ib;
	return ib;
}

static int vrnic_create_mr_cmd(struct vrnic_dev *vdev,
			       struct vrnic_admin_cmd *cmd, struct vrnic_mr *mr)
{
	u32 key;
	int ret;

	cmd->opcode = VRNIC_ADMIN_CREATE_MR;
	ret = vrnic_admin_exec(vdev, cmd, &key);
	if (ret)
		return ret;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	return 0;
}

struct ib_mr *vrnic_get_dma_mr(struct ib_pd *ibpd, int access)
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
	ret = vrnic_create_mr_cmd(vdev, &cmd, mr);
	if (ret) {
		kfree(mr);
		return ERR_PTR(ret);
	}
	return &mr->ibmr;
}

/*
 * The 4 KiB DMA blocks of a umem as a le64 list in coherent memory, for a
 * device that copies it during the admin command.
 */
int vrnic_umem_page_list(struct vrnic_dev *vdev, struct ib_umem *umem,
			 __le64 **list, dma_addr_t *list_dma, size_t *list_size)
{
	size_t n = ib_umem_num_dma_blocks(umem, SZ_4K), i = 0;
	struct ib_block_iter biter;
	__le64 *l;

	*list_size = max_t(size_t, n * sizeof(*l), sizeof(*l));
	l = dma_alloc_coherent(&vdev->pdev->dev, *list_size, list_dma,
			       GFP_KERNEL);
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

struct ib_mr *vrnic_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 virt, int access, struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibpd->device);
	struct vrnic_admin_cmd cmd = {};
	dma_addr_t l1_dma = 0, l2_dma = 0;
	size_t npages, nl1 = 0, i;
	__le64 *l1 = NULL, *l2 = NULL;
	struct ib_block_iter biter;
	struct vrnic_mr *mr;
	int ret;

	/* Optional flags (relaxed ordering) may be ignored, the rest not. */
	access &= ~IB_ACCESS_OPTIONAL;
	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC |
		       IB_ACCESS_FLUSH_GLOBAL | IB_ACCESS_MW_BIND))
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		goto err_free;
	}
	npages = ib_umem_num_dma_blocks(mr->umem, SZ_4K);
	if (npages > VRNIC_MAX_MR_PAGES) {
		ret = -EINVAL;
		goto err_umem;
	}

	cmd.create_mr.iova = cpu_to_le64(virt);
	cmd.create_mr.length = cpu_to_le64(length);
	cmd.create_mr.pdn = cpu_to_le32(to_vpd(ibpd)->pdn);
	cmd.create_mr.access = cpu_to_le32(vrnic_ib_access(access));
	cmd.create_mr.npages = cpu_to_le32(npages);
	cmd.create_mr.page_shift = 12;

	if (npages <= 3) {
		__le64 pages[3] = {};

		i = 0;
		rdma_umem_for_each_dma_block(mr->umem, &biter, SZ_4K)
			pages[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));
		cmd.create_mr.pbl_mode = VRNIC_PBL_INLINE;
		cmd.create_mr.pbl = pages[0];
		cmd.create_mr.inline_pages[0] = pages[1];
		cmd.create_mr.inline_pages[1] = pages[2];
	} else {
		/* Two levels: pages of 512 addresses, and a list of them. */
		nl1 = DIV_ROUND_UP(npages, VRNIC_PBL_PER_PAGE);
		l2 = dma_alloc_coherent(&vdev->pdev->dev, nl1 * sizeof(*l2),
					&l2_dma, GFP_KERNEL);
		l1 = dma_alloc_coherent(&vdev->pdev->dev, npages * sizeof(*l1),
					&l1_dma, GFP_KERNEL);
		if (!l1 || !l2) {
			ret = -ENOMEM;
			goto err_lists;
		}
		i = 0;
		rdma_umem_for_each_dma_block(mr->umem, &biter, SZ_4K)
			l1[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));
		for (i = 0; i < nl1; i++)
			l2[i] = cpu_to_le64(l1_dma + i * VRNIC_PBL_PER_PAGE *
					    sizeof(*l1));
		cmd.create_mr.pbl_mode = VRNIC_PBL_LEVEL2;
		cmd.create_mr.pbl = cpu_to_le64(l2_dma);
	}
	ret = vrnic_create_mr_cmd(vdev, &cmd, mr);
	if (ret)
		goto err_lists;
	if (l1)
		dma_free_coherent(&vdev->pdev->dev, npages * sizeof(*l1), l1, l1_dma);
	if (l2)
		dma_free_coherent(&vdev->pdev->dev, nl1 * sizeof(*l2), l2, l2_dma);
	return &mr->ibmr;

err_lists:
	if (l1)
		dma_free_coherent(&vdev->pdev->dev, npages * sizeof(*l1), l1, l1_dma);
	if (l2)
		dma_free_coherent(&vdev->pdev->dev, nl1 * sizeof(*l2), l2, l2_dma);
err_umem:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

/*
 * Fast registration (FRWR) for kernel ULPs: the device MR is created
 * invalid with room for max_num_sg pages; map_mr_sg fills a page list in
 * coherent memory and an IB_WR_REG_MR work request hands it to the device,
 * which reads it when the SQ reaches the request.
 */
struct ib_mr *vrnic_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
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
	ret = vrnic_create_mr_cmd(vdev, &cmd, mr);
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

static int vrnic_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct vrnic_mr *mr = container_of(ibmr, struct vrnic_mr, ibmr);

	if (mr->npages == mr->max_pages)
		return -ENOMEM;
	mr->pbl[mr->npages++] = cpu_to_le64(addr);
	return 0;
}

int vrnic_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		    unsigned int *sg_offset)
{
	struct vrnic_mr *mr = container_of(ibmr, struct vrnic_mr, ibmr);

	mr->npages = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, vrnic_set_page);
}

int vrnic_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct vrnic_mr *mr = container_of(ibmr, struct vrnic_mr, ibmr);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_DESTROY_MR };
	struct vrnic_dev *vdev = to_vdev(ibmr->device);
	int ret;

	cmd.destroy.id = cpu_to_le32(ibmr->lkey);
	ret = vrnic_admin_exec(vdev, &cmd, NULL);
	if (ret && ret != -ENODEV)
		return ret;
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
int vrnic_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_ALLOC_MW };
	u32 key;
	int ret;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	cmd.alloc_mw.pdn = cpu_to_le32(to_vpd(ibmw->pd)->pdn);
	cmd.alloc_mw.type = ibmw->type == IB_MW_TYPE_1 ? VRNIC_MW_TYPE_1 :
							 VRNIC_MW_TYPE_2;
	ret = vrnic_admin_exec(to_vdev(ibmw->device), &cmd, &key);
	if (ret)
		return ret;
	ibmw->rkey = key;
	return 0;
}

int vrnic_dealloc_mw(struct ib_mw *ibmw)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_DEALLOC_MW };
	int ret;

	cmd.destroy.id = cpu_to_le32(ibmw->rkey);
	ret = vrnic_admin_exec(to_vdev(ibmw->device), &cmd, NULL);
	return ret == -ENODEV ? 0 : ret;
}
