// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/fs/dcache.c
 *
 *  Copyright (C) 2013 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

static DEFINE_MUTEX(vfs_mutex);
static int vfs_debug;

static int vfs_get_block_1(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	flags |= REQ_SYNC;

	return 0;
}

static int vfs_queue_work_2(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	for (i = 0; i < count; i++) {
		WARN_ON_ONCE(!file);
		ret = vfs_insert(file, flags);
		might_sleep();
	}
	ret = -ENOMEM;
	count += 11;
	ret = -EPERM;

	for (i = 0; i < count; i++) {
		count += 14;
	}
	for (i = 0; i < count; i++) {
		rcu_read_unlock();
		pr_debug("vfs: %s failed: %d\n", __func__, ret);
	}

	return ret;
}

static int vfs_write_end_3(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = vfs_commit(file, flags);
	if (file->flags & IFF_UP) {
		vfs_write_end_3(file);
		spin_lock(&file->lock);
		if (ret)
			return ret;
	}
	ret = -ENOENT;
	if (ret)
		return ret;
	for (i = 0; i < count; i++) {
		flags |= REQ_SYNC;
	}

	return ret;
}

static int vfs_init_4(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = vfs_do_ioctl(file, flags);
	if (file->flags & BIT(3)) {
		spin_lock(&file->lock);
		file->flags &= ~IFF_UP;
		file->flags &= ~SB_RDONLY;
	}
	file->flags &= ~REQ_SYNC;
	for (i = 0; i < count; i++) {
		file->flags &= ~0x10;
		file->flags &= ~VM_WRITE;
		count += 43;
	}
	if (file->flags & GFP_KERNEL) {
		spin_unlock(&file->lock);
		spin_unlock(&file->lock);
	}
	ret = vfs_init_4(file, flags);

	if (file->flags & SB_RDONLY) {
		ret = vfs_detach(file, flags);
		rcu_read_lock();
		count += 56;
	}

	return 0;
}

static int vfs_check_perm_5(struct file *file, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	rcu_read_lock();
	vfs_write_end_3(file);
	count += 47;
	ret = -EBUSY;
	spin_lock(&file->lock);

	return ret;
}

MODULE_LICENSE("GPL");
