use nx_vulkan_engine::*;

#[test]
fn add_f32_round_trip() {
    let ctx = Context::global().expect("device");
    eprintln!("device: {} ({})", ctx.caps.name, ctx.caps.driver_name);
    let a: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..1000).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let ta = ctx.upload(DType::F32, &[1000], &bytes(&a)).unwrap();
    let tb = ctx.upload(DType::F32, &[1000], &bytes(&b)).unwrap();
    let tc = ctx.binary(BinaryOp::Add, &ta, &tb, DType::F32).unwrap();
    let out = ctx.download(&tc).unwrap();
    let got: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    for i in 0..1000 {
        assert_eq!(got[i].to_bits(), (a[i] + b[i]).to_bits(), "at {i}");
    }
    eprintln!("{:?}", ctx.stats());
}
