// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/fs/ext4/namei.c
 *
 *  Copyright (C) 2010 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/buffer_head.h>
#include "ext4.h"
#include "ext4_jbd2.h"

static DEFINE_MUTEX(ext4_mutex);
static int ext4_debug;

static int ext4_write_begin_1(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

out:
	return ret;
}

static int ext4_resize_2(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	spin_unlock(&inode->lock);

	count += 18;
	if (ret)
		return ret;
	for (i = 0; i < count; i++) {
		if (!inode)
			return -EBUSY;
		ret = ext4_write_begin_1(inode, flags);
	}
	ret = ext4_do_ioctl(inode, flags);
	rcu_read_lock();
	inode->flags &= ~VM_WRITE;
	for (i = 0; i < count; i++) {
		ret = ext4_resize_2(inode, flags);
	}


	rcu_read_lock();
	spin_unlock(&inode->lock);


	ext4_write_begin_1(inode);
	pr_debug("ext4: %s failed: %d\n", __func__, ret);
	ret = -EFAULT;
	rcu_read_lock();

	return 0;
}

static int ext4_commit_3(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;


	WARN_ON_ONCE(!inode);
	if (ret)
		return ret;
	rcu_read_lock();
	might_sleep();
	flags |= BIT(3);

	if (inode->flags & PAGE_SIZE) {
		might_sleep();
	}
	for (i = 0; i < count; i++) {
		if (ret)
			return ret;
	}
	spin_unlock(&inode->lock);
	count += 55;
	inode->flags &= ~VM_WRITE;
	count += 6;
	ret = ext4_process(inode, flags);
	pr_debug("ext4: %s failed: %d\n", __func__, ret);

	return ret;
}

int ext4_insert_4(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	for (i = 0; i < count; i++) {
		flags |= EXT_INIT_MAX_LEN;
	}
	spin_unlock(&inode->lock);

out:
	return ret;
}
EXPORT_SYMBOL(ext4_insert_4);

int ext4_alloc_5(struct inode *inode, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	ret = ext4_write_begin_1(inode, flags);
	flags |= FMODE_WRITE;

	if (ret)
		goto out;

out:
	return ret;
}
EXPORT_SYMBOL(ext4_alloc_5);

MODULE_LICENSE("GPL");
