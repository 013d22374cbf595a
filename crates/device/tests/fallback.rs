//! The io_uring-to-sync fallback. `TAMER_DISABLE_URING` is process-global, so this test has its
//! own binary: nothing else here may open a uring device.

mod common;

use std::sync::Arc;

use tamer_device::{
    open_device, uring_available, Arena, DeviceError, DeviceSpec, IoRequest, UringConfig,
    UringDevice, BLOCK_SIZE,
};

use common::{clear_frame, fill_frame, frame_contents, reap_ok, TestDir};

#[test]
fn disabled_uring_falls_back_to_sync() {
    // The only test of this binary, and it sets the variable before anything reads it.
    std::env::set_var("TAMER_DISABLE_URING", "1");
    let block = BLOCK_SIZE as u64;
    let dir = TestDir::new("fallback");
    let file = dir.device_file("data", 16);
    let arena = Arc::new(Arena::new(4).unwrap());

    let unavailable = uring_available().expect_err("uring must look unavailable");
    assert!(
        matches!(unavailable, DeviceError::UringUnavailable { .. }),
        "{unavailable:?}"
    );
    let direct = UringDevice::open(file.clone(), arena.clone(), UringConfig { entries: 8 });
    match direct {
        Err(err @ DeviceError::UringUnavailable { .. }) => {
            let message = err.to_string();
            assert!(message.contains("TAMER_DISABLE_URING"), "{message}");
            assert!(message.contains("sync device"), "{message}");
        }
        Err(other) => panic!("expected UringUnavailable, got {other:?}"),
        Ok(_) => panic!("UringDevice::open ignored TAMER_DISABLE_URING"),
    }

    let spec = DeviceSpec::Uring {
        file,
        config: UringConfig { entries: 8 },
    };
    let mut device = open_device(&spec, arena.clone(), 0).expect("fallback device");
    assert_eq!(device.name(), "sync");
    assert_eq!(
        device.queue_depth(),
        8,
        "the fallback keeps the ring's depth"
    );
    assert_eq!(device.capacity_bytes(), 16 * block);

    // It works: a 3-frame write read back into another frame.
    for frame in 0..3 {
        fill_frame(&arena, frame, 0xfa11_0000 + u64::from(frame));
    }
    let want: Vec<Vec<u8>> = (0..3).map(|f| frame_contents(&arena, f)).collect();
    device.push(IoRequest::write(4 * block, 0, 3, 1)).unwrap();
    reap_ok(&mut *device, &[1]);
    for (i, expected) in want.iter().enumerate() {
        clear_frame(&arena, 3);
        device
            .push(IoRequest::read((4 + i as u64) * block, 3, 1, 2))
            .unwrap();
        reap_ok(&mut *device, &[2]);
        assert!(
            frame_contents(&arena, 3) == *expected,
            "block {} differs",
            4 + i
        );
    }
    device.flush().unwrap();
}
