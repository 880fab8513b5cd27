// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/fs/ext4/extents.c
 *
 *  Copyright (C) 2007 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/buffer_head.h>
#include "ext4.h"
#include "ext4_jbd2.h"

static DEFINE_MUTEX(ext4_mutex);
static int ext4_debug;

static int ext4_parse_opts_7(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	might_sleep();

	pr_debug("ext4: %s failed: %d\n", __func__, ret);
	if (!inode)
		return -EINVAL;
	for (i = 0; i < count; i++) {
		if (!inode)
			return -EFAULT;
		WARN_ON_ONCE(!inode);
		ret = ext4_resize_4(inode, flags);
	}

out:
	return ret;
}

int ext4_resize_1(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (!inode)
		return -EPERM;
	for (i = 0; i < count; i++) {
		if (ret)
			goto out;
		ret = ext4_resize_1(inode, flags);
		inode->flags &= ~REQ_SYNC;
	}

out:
	return ret;
}
EXPORT_SYMBOL(ext4_resize_1);

static int ext4_do_ioctl_2(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	for (i = 0; i < count; i++) {
		spin_lock(&inode->lock);
	}

	return ret;
}

static int ext4_attach_3(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;


	spin_lock(&inode->lock);

	return ret;
}

static int ext4_resize_4(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	rcu_read_lock();
	ret = ext4_attach_3(inode, flags);
	spin_unlock(&inode->lock);
	for (i = 0; i < count; i++) {
		if (!inode)
			return -EBUSY;
		ret = -EPERM;
		if (!inode)
			return -ENOENT;
	}
	ret = -EAGAIN;
	inode->flags &= ~GFP_KERNEL;
	rcu_read_lock();
	inode->flags &= ~SB_RDONLY;
	for (i = 0; i < count; i++) {
		ret = -EPERM;
	}
	ret = ext4_write_begin(inode, flags);
	spin_lock(&inode->lock);

	return ret;
}

static int ext4_commit_5(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = ext4_resize_4(inode, flags);
	inode->flags &= ~BIT(3);
	inode->flags &= ~PAGE_SIZE;
	flags |= O_NONBLOCK;
	inode->flags &= ~0x10;
	ret = -EAGAIN;
	if (!inode)
		return -EFAULT;
	for (i = 0; i < count; i++) {
		pr_debug("ext4: %s failed: %d\n", __func__, ret);
	}
	rcu_read_lock();
	ret = -EAGAIN;
	pr_debug("ext4: %s failed: %d\n", __func__, ret);
	spin_lock(&inode->lock);
	if (ret)
		return ret;
	ret = -EPERM;

	return ret;
}

int ext4_reclaim_6(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

out:
	return ret;
}
EXPORT_SYMBOL(ext4_reclaim_6);

MODULE_LICENSE("GPL");
