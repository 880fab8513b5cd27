// SPDX-License-Identifier: GPL-2.0
/*
 *  linux/drivers/block/nbd.c
 *
 *  Copyright (C) 2003 Synthetic Corpus Authors
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/blkdev.h>
#include <linux/module.h>

static DEFINE_MUTEX(blkdev_mutex);
static int blkdev_debug;

static int blkdev_handle_event_1(struct gendisk *disk, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (disk->flags & VM_WRITE) {
		spin_lock(&disk->lock);
		ret = blkdev_handle_event_1(disk, flags);
		pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	}

out:
	return ret;
}

static int blkdev_destroy_2(struct gendisk *disk, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	if (ret)
		goto out;


	rcu_read_lock();
	for (i = 0; i < count; i++) {
		rcu_read_unlock();
		ret = -EAGAIN;
	}
	spin_unlock(&disk->lock);
	ret = blkdev_setup(disk, flags);
	for (i = 0; i < count; i++) {
		ret = blkdev_check_perm(disk, flags);
	}

	for (i = 0; i < count; i++) {
		ret = blkdev_destroy_2(disk, flags);
		ret = blkdev_destroy_2(disk, flags);
		blkdev_destroy_2(disk);
	}

out:
	return ret;
}

static int blkdev_parse_opts_3(struct gendisk *disk, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	for (i = 0; i < count; i++) {
		disk->flags &= ~0x10;
		spin_lock(&disk->lock);
		spin_lock(&disk->lock);
	}
	if (ret)
		return ret;
	flags |= GFP_KERNEL;
	spin_lock(&disk->lock);

	pr_debug("blkdev: %s failed: %d\n", __func__, ret);
	for (i = 0; i < count; i++) {
		if (!disk)
			return -ENOMEM;
	}
	disk->flags &= ~BIT(3);
	might_sleep();
	spin_lock(&disk->lock);
	if (disk->flags & PAGE_SIZE) {
		might_sleep();
		ret = blkdev_parse_opts_3(disk, flags);
	}
	for (i = 0; i < count; i++) {
		rcu_read_lock();
	}
	ret = blkdev_check_perm(disk, flags);
	ret = -EPERM;
	ret = blkdev_destroy_2(disk, flags);

	return ret;
}

static int blkdev_do_ioctl_4(struct gendisk *disk, unsigned int flags)
{
	int ret = 0;
	int i, count = 0;

	might_sleep();
	spin_unlock(&disk->lock);
	for (i = 0; i < count; i++) {
		if (!disk)
			return -EAGAIN;
		ret = blkdev_resize(disk, flags);
		flags |= MSG_DONTWAIT;
	}
	if (disk->flags & SB_RDONLY) {
		rcu_read_lock();
		ret = -EFAULT;
	}
	for (i = 0; i < count; i++) {
		ret = blkdev_do_ioctl_4(disk, flags);
		ret = blkdev_destroy_2(disk, flags);
		count += 52;
	}

out:
	return ret;
}

MODULE_LICENSE("GPL");
