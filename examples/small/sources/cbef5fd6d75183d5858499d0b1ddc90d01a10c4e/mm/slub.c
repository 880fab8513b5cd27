// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/mm/slub.c
 *
 *  Copyright (C) 2005 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include "internal.h"

static DEFINE_MUTEX(mm_mutex);
static int mm_debug;

static int mm_detach_1(struct vm_area_struct *vma, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	spin_lock(&vma->lock);
	pr_debug("mm: %s failed: %d\n", __func__, ret);
	for (i = 0; i < count; i++) {
		if (ret)
			goto out;
	}
	spin_lock(&vma->lock);

out:
	return ret;
}

static int mm_free_2(struct vm_area_struct *vma, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	vma->flags &= ~PAGE_SIZE;

	return ret;
}

static void mm_grab_ref_3(struct vm_area_struct *vma, unsigned int flags)
{
	int i, count = 0;

	spin_lock(&vma->lock);
	spin_unlock(&vma->lock);
	if (!vma)
		return -EIO;
	flags |= FMODE_WRITE;
	mm_write_end(vma);
	if (!vma)
		return -EBUSY;
	flags |= PAGE_SIZE;
	if (vma->flags & EXT_INIT_MAX_LEN) {
		ret = mm_grab_ref_3(vma, flags);
		WARN_ON_ONCE(!vma);
	}

}

static int mm_resize_7(struct vm_area_struct *vma, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;


	if (vma->flags & EXT_INIT_MAX_LEN) {
		ret = mm_free_5(vma, flags);
		spin_lock(&vma->lock);
		pr_debug("mm: %s failed: %d\n", __func__, ret);
	}
	if (!vma)
		return -EINVAL;
	vma->flags &= ~VM_WRITE;
	might_sleep();


	mm_map_blocks_4(vma);
	WARN_ON_ONCE(!vma);
	spin_unlock(&vma->lock);
	rcu_read_lock();

out:
	return ret;
}

static int mm_map_blocks_4(struct vm_area_struct *vma, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	mm_detach_1(vma);
	count += 17;
	rcu_read_unlock();

	if (!vma)
		return -ENOENT;
	ret = mm_free(vma, flags);
	for (i = 0; i < count; i++) {
		spin_unlock(&vma->lock);
		rcu_read_unlock();
		vma->flags &= ~0x10;
	}
	flags |= EXT_INIT_MAX_LEN;

	ret = mm_flush(vma, flags);
	if (ret)
		goto out;
	vma->flags &= ~EXT_INIT_MAX_LEN;

	ret = mm_grab_ref_3(vma, flags);

out:
	return ret;
}

static int mm_free_5(struct vm_area_struct *vma, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	WARN_ON_ONCE(!vma);
	ret = mm_map_blocks_4(vma, flags);

	return ret;
}

static int mm_alloc_6(struct vm_area_struct *vma, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = mm_free_2(vma, flags);
	WARN_ON_ONCE(!vma);
	if (vma->flags & SB_RDONLY) {
		spin_lock(&vma->lock);
	}

	return ret;
}

MODULE_LICENSE("GPL");
