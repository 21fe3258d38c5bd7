"""Read a PaddlePaddle (fluid 1.x) saved tensor file with numpy, without paddle.

Why our own reader: paddle is a GB-sized dependency that does not install everywhere, and the file
format is small (paddle/fluid/framework/lod_tensor.cc, `SerializeToStream`):

    u32 version (0) | u64 lod_level | per level: u64 size in bytes, then that many bytes of u64 offsets
    | u32 tensor version (0) | i32 desc size | TensorDesc protobuf | little-endian data

TensorDesc (framework.proto) holds field 1 `data_type` (a varint, VarType.Type) and field 2 `dims`
(repeated int64 varints, packed or not). Only what the file must hold is accepted: anything else
(another version, a dtype this reader does not know, a size that does not match the dims, bytes left
over) raises a ValueError naming the file.
"""

import struct
from typing import Dict, List, Optional, Sequence, Tuple

import numpy

# VarType.Type values (framework.proto) -> numpy dtype.
DTYPES: Dict[int, str] = {0: "bool", 1: "<i2", 2: "<i4", 3: "<i8", 4: "<f2", 5: "<f4", 6: "<f8", 20: "u1", 21: "i1"}


def read_tensor(
    data: bytes, name: str, shape: Optional[Sequence[int]] = None, dtype: Optional[str] = None
) -> numpy.ndarray:
    """The array a paddle tensor file holds.

    data (bytes): The file's bytes.
    name (str): The file's name, for errors.
    shape (Optional[Sequence[int]]): The shape it must have (None: any).
    dtype (Optional[str]): The numpy dtype it must have, e.g. "float32" (None: any).
    RETURNS (numpy.ndarray): A read-only array over a copy of the data, in the file's dtype.
    """
    view = memoryview(data)
    position = 0

    def take(size: int, what: str) -> memoryview:
        nonlocal position
        if position + size > len(view):
            raise ValueError(f"{name}: truncated ({len(view)} bytes) while reading its {what}.")
        chunk = view[position : position + size]
        position += size
        return chunk

    (version,) = struct.unpack("<I", take(4, "version"))
    if version != 0:
        raise ValueError(f"{name}: not a paddle tensor file (version {version}, expected 0).")
    (lod_level,) = struct.unpack("<Q", take(8, "LoD level"))
    if lod_level > 8:
        raise ValueError(f"{name}: not a paddle tensor file (LoD level {lod_level}).")
    for _ in range(lod_level):
        (size,) = struct.unpack("<Q", take(8, "LoD size"))
        take(size, "LoD offsets")
    (tensor_version,) = struct.unpack("<I", take(4, "tensor version"))
    if tensor_version != 0:
        raise ValueError(f"{name}: tensor version {tensor_version}, expected 0.")
    (desc_size,) = struct.unpack("<i", take(4, "description size"))
    if not 0 < desc_size < 1024:
        raise ValueError(f"{name}: a tensor description of {desc_size} bytes is not plausible.")
    data_type, dims = _tensor_desc(bytes(take(desc_size, "tensor description")), name)
    if data_type not in DTYPES:
        raise ValueError(f"{name}: data type {data_type} is not one this reader knows ({sorted(DTYPES)}).")
    file_dtype = numpy.dtype(DTYPES[data_type])
    if any(dim < 0 for dim in dims):
        raise ValueError(f"{name}: negative dimension in {dims}.")
    count = int(numpy.prod(dims, dtype="int64")) if dims else 1
    body = take(count * file_dtype.itemsize, f"data ({dims} of {file_dtype})")
    if position != len(view):
        raise ValueError(f"{name}: {len(view) - position} bytes after the data of a {dims} tensor.")
    array = numpy.frombuffer(bytes(body), dtype=file_dtype).reshape(dims)
    if shape is not None and tuple(array.shape) != tuple(shape):
        raise ValueError(f"{name}: shape {tuple(array.shape)}, expected {tuple(shape)}.")
    if dtype is not None and array.dtype != numpy.dtype(dtype):
        raise ValueError(f"{name}: dtype {array.dtype}, expected {numpy.dtype(dtype)}.")
    return array.astype(array.dtype.newbyteorder("="), copy=False)


def write_tensor(array: numpy.ndarray) -> bytes:
    """The bytes of a paddle tensor file holding array (no LoD): what read_tensor reads back. For tests
    and for fabricated files; paddle writes the same layout."""
    codes = {numpy.dtype(value): key for key, value in DTYPES.items()}
    array = numpy.ascontiguousarray(array)
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    code = codes.get(little.dtype)
    if code is None:
        raise ValueError(f"write_tensor: no paddle data type for {array.dtype}.")
    desc = b"\x08" + _varint(code) + b"".join(b"\x10" + _varint(dim) for dim in array.shape)
    header = struct.pack("<IQI", 0, 0, 0) + struct.pack("<i", len(desc)) + desc
    return header + little.tobytes()


def _tensor_desc(desc: bytes, name: str) -> Tuple[int, List[int]]:
    """(data_type, dims) from a TensorDesc message."""
    data_type: Optional[int] = None
    dims: List[int] = []
    position = 0
    while position < len(desc):
        key, position = _read_varint(desc, position, name)
        field, wire = key >> 3, key & 7
        if field == 1 and wire == 0:
            data_type, position = _read_varint(desc, position, name)
        elif field == 2 and wire == 0:
            dim, position = _read_varint(desc, position, name)
            dims.append(_signed64(dim))
        elif field == 2 and wire == 2:  # packed dims
            size, position = _read_varint(desc, position, name)
            end = position + size
            while position < end:
                dim, position = _read_varint(desc, position, name)
                dims.append(_signed64(dim))
        else:
            raise ValueError(f"{name}: unexpected field {field} (wire type {wire}) in the tensor description.")
    if data_type is None:
        raise ValueError(f"{name}: the tensor description has no data type.")
    return data_type, dims


def _read_varint(data: bytes, position: int, name: str) -> Tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError(f"{name}: a malformed varint in the tensor description.")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
