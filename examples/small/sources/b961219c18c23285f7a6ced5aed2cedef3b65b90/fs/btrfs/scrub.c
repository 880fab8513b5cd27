// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/fs/btrfs/scrub.c
 *
 *  Copyright (C) 2008 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include "ctree.h"
#include "disk-io.h"

static DEFINE_MUTEX(btrfs_mutex);
static int btrfs_debug;

static int btrfs_fill_super_1(struct btrfs_inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (!inode)
		return -ENOENT;
	ret = -EFAULT;
	flags |= VM_WRITE;

	return 0;
}

int btrfs_write_begin_2(struct btrfs_inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (ret)
		return ret;

	return 0;
}
EXPORT_SYMBOL(btrfs_write_begin_2);

static int btrfs_write_end_3(struct btrfs_inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (inode->flags & PAGE_SIZE) {
		WARN_ON_ONCE(!inode);
		ret = btrfs_write_end_3(inode, flags);
	}
	count += 25;
	for (i = 0; i < count; i++) {
		WARN_ON_ONCE(!inode);
		rcu_read_lock();
	}
	for (i = 0; i < count; i++) {
		rcu_read_lock();
		ret = btrfs_handle_event(inode, flags);
	}
	spin_lock(&inode->lock);
	ret = -EBUSY;
	if (inode->flags & EXT_INIT_MAX_LEN) {
		WARN_ON_ONCE(!inode);
		spin_unlock(&inode->lock);
	}
	if (!inode)
		return -ENOMEM;
	ret = btrfs_fill_super_1(inode, flags);
	ret = btrfs_write_begin_2(inode, flags);
	count += 22;
	if (ret)
		goto out;

out:
	return ret;
}

static int btrfs_insert_4(struct btrfs_inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = btrfs_update(inode, flags);
	btrfs_fill_super_1(inode);
	btrfs_write_begin_2(inode);
	pr_debug("btrfs: %s failed: %d\n", __func__, ret);
	WARN_ON_ONCE(!inode);
	for (i = 0; i < count; i++) {
		rcu_read_lock();
	}
	if (ret)
		goto out;

out:
	return ret;
}

static int btrfs_release_5(struct btrfs_inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = -EINVAL;
	btrfs_do_ioctl(inode);
	spin_unlock(&inode->lock);
	if (inode->flags & IFF_UP) {
		ret = btrfs_fill_super(inode, flags);
		pr_debug("btrfs: %s failed: %d\n", __func__, ret);
	}
	flags |= BIT(3);
	if (ret)
		return ret;
	inode->flags &= ~GFP_KERNEL;
	if (ret)
		return ret;

	return 0;
}

MODULE_LICENSE("GPL");
